"""Strict inputs (issue #14 items 5–7): one rule for numeric parameters (booleans and strings refused),
negative seeds refused, `table=None` named, and interrupted queries surfacing as KeyboardInterrupt."""
import decimal
import fractions
import sys
import threading

import duckdb
import numpy as np
import pytest
from conftest import leftovers

import duckdp
from duckdp import InvalidParameter, SchemaError, Session, cli
from duckdp.rng import Randomness

BAD_NUMBERS = [True, False, np.bool_(True), "1", "1e-6", b"1", [1.0], 1 + 0j]
DESC = {a["name"]: a for a in duckdp.algorithms()}


@pytest.fixture
def small(con):
    con.execute("CREATE TABLE t AS SELECT range % 50 AS user_id, 'w' || (range % 7) AS item FROM range(500)")
    return con


def budget_of(algo: str) -> dict:
    return dict(rho=0.5) if "rho/delta" in DESC[algo]["budgets"] else dict(epsilon=1.0)


def refused(call, name: str):
    with pytest.raises(InvalidParameter, match=name):
        call()


@pytest.mark.parametrize("bad", BAD_NUMBERS, ids=repr)
def test_budget_and_core_parameters_refuse_booleans_and_strings(small, bad):
    def sel(**kw):
        args = dict(algo="weighted_gaussian", epsilon=1.0, delta=1e-5, max_contributions=4, seed=1) | kw
        return lambda: duckdp.select(small, "t", **args)

    refused(sel(epsilon=bad), "epsilon")
    refused(sel(delta=bad), "delta")
    refused(sel(epsilon=None, rho=bad), "rho")
    refused(sel(max_contributions=bad), "max_contributions")
    refused(sel(seed=bad), "seed")
    refused(lambda: duckdp.explain("mad", epsilon=bad, delta=1e-5), "epsilon")
    refused(lambda: duckdp.explain("mad", rho=bad, delta=1e-5), "rho")
    refused(lambda: duckdp.explain("mad", epsilon=1, delta=1e-5, keys_per_user=[1, bad]), "keys_per_user")
    refused(lambda: Session(small, epsilon=bad, delta=1e-5), "epsilon")
    refused(lambda: Session(small, rho=1.0, delta=bad), "delta")
    for name in ("rho", "delta", "seed", "initial_epsilon", "delta_per_call", "kbar", "relative_error"):
        args = dict(rho=0.5, delta=1e-5, seed=1) | {name: bad}
        refused(lambda args=args: duckdp.count_release(small, "t", **args), name)
    assert leftovers(small) == []


@pytest.mark.parametrize("bad", [True, "1", "3"], ids=repr)
def test_every_mechanism_parameter_refuses_booleans_and_strings(small, bad):
    for algo, desc in DESC.items():
        for name in desc["params"]:
            extra = {"allow_unproven": True} if desc["unproven"] else {}
            with pytest.raises(InvalidParameter, match=name):
                duckdp.select(small, "t", algo=algo, delta=1e-5, max_contributions=4, seed=1,
                              **budget_of(algo), **extra, **{name: bad})


def test_other_real_number_types_are_accepted(small):
    for eps in (1, 1.0, np.float32(1.0), np.int64(1), fractions.Fraction(1), decimal.Decimal("1")):
        r = duckdp.select(small, "t", algo="weighted_gaussian", epsilon=eps, delta=1e-5, max_contributions=np.int32(4),
                          seed=np.uint8(1))
        assert r.budget.epsilon == 1.0 and r.max_contributions == 4


@pytest.mark.parametrize("seed", [-1, -(2**70)])
def test_negative_seed_is_a_duckdp_error(small, seed):
    with pytest.raises(InvalidParameter, match="seed must be an integer >= 0"):
        duckdp.select(small, "t", algo="weighted_gaussian", epsilon=1, delta=1e-5, seed=seed)
    with pytest.raises(InvalidParameter, match="seed"):
        duckdp.count_release(small, "t", rho=0.5, delta=1e-5, seed=seed)
    with pytest.raises(InvalidParameter, match="seed"):
        Randomness(seed)
    assert Randomness(0).seeded and Randomness(2**100).seeded and not Randomness(None).seeded


def test_cli_negative_seed_exits_with_one_line(tmp_path, capsys):
    duckdb.sql(f"COPY (SELECT range % 50 AS user_id, 'w' || (range % 7) AS item FROM range(500)) "
               f"TO '{tmp_path / 'in.parquet'}' (FORMAT PARQUET)")
    code = cli.main(["select", str(tmp_path / "in.parquet"), "--epsilon", "1", "--delta", "1e-5",
                     "-o", str(tmp_path / "o.parquet"), "--seed", "-1"])
    err = capsys.readouterr().err
    assert code == 2 and err == "duckdp: error: seed must be an integer >= 0, got -1\n"
    assert not (tmp_path / "o.parquet").exists()
    code = cli.main(["select", str(tmp_path / "in.parquet"), "--epsilon", "1", "--delta", "1e-5",
                     "-o", str(tmp_path / "o.parquet"), "--algo", "dpsips", "--param", "iterations=true"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "iterations" in err


def test_table_none_is_named(small):
    for call in (lambda: duckdp.select(small, None, algo="weighted_gaussian", epsilon=1, delta=1e-5),
                 lambda: duckdp.count_release(small, None, rho=0.5, delta=1e-5)):
        with pytest.raises(SchemaError) as info:
            call()
        message = str(info.value)
        assert "got None" in message and "register" not in message and "\n" not in message
    assert leftovers(small) == []


# -- interruption ------------------------------------------------------------------------------

@pytest.fixture
def endless(con):
    """A view over 10¹¹ rows: every query on it runs until interrupted."""
    con.execute("CREATE VIEW big AS SELECT range % 100000 AS user_id, range % 1000003 AS item "
                "FROM range(100000000000)")
    return con


def interrupt_after(con, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, con.interrupt)
    timer.start()
    return timer


@pytest.mark.parametrize("skip_null_check", [False, True], ids=["null-check", "mechanism"])
@pytest.mark.parametrize("algo", ["weighted_gaussian", "dpsips", "pcr"])
def test_interrupt_surfaces_as_keyboard_interrupt(endless, monkeypatch, algo, skip_null_check):
    """`con.interrupt()` from another thread (what Ctrl-C does) during the null check or the mechanism's
    own queries: KeyboardInterrupt, nothing left behind, the connection usable, the session charged."""
    if skip_null_check:     # so the interrupt lands in the mechanism's queries
        monkeypatch.setattr(sys.modules["duckdp.lifecycle"], "check_nulls", lambda con, source: None)
    s = Session(endless, rho=1.0, delta=1e-5)
    timer = interrupt_after(endless, 0.5)
    with pytest.raises(KeyboardInterrupt):
        if algo == "pcr":
            s.count_release("big", rho=0.5, delta=1e-6)
        else:
            s.select("big", algo=algo, rho=0.5, delta=1e-6)
    timer.join()
    assert leftovers(endless) == [] and endless.sql("SELECT 42").fetchall() == [(42,)]
    assert s.spent.value == 0.5 and s.ledger["error"][0].as_py().startswith("KeyboardInterrupt")


def test_ctrl_c_runtime_error_becomes_keyboard_interrupt(small, monkeypatch):
    """Ctrl-C inside a DuckDB query raises RuntimeError('Query interrupted'): re-raised as KeyboardInterrupt;
    any other RuntimeError passes through unchanged."""
    from duckdp.stages.duckdb import DuckDBStages

    def ctrl_c(*args, **kwargs):
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(DuckDBStages, "release", ctrl_c)
    with pytest.raises(KeyboardInterrupt) as info:
        duckdp.select(small, "t", algo="weighted_gaussian", epsilon=1, delta=1e-5)
    assert isinstance(info.value.__cause__, RuntimeError)

    def other(*args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr(DuckDBStages, "release", other)
    with pytest.raises(RuntimeError, match="something else"):
        duckdp.select(small, "t", algo="weighted_gaussian", epsilon=1, delta=1e-5)
    assert leftovers(small) == []


def test_cli_progress_bar_only_on_a_terminal(tmp_path, capfd, monkeypatch):
    """DuckDB's progress bar (on by default, drawn on stdout for queries over 2 s) must be off when
    output is piped: on a loaded machine it made --json output unparseable."""
    import json

    duckdb.sql(f"COPY (SELECT range % 50 AS user_id, 'w' || (range % 7) AS item FROM range(500)) "
               f"TO '{tmp_path / 'in.parquet'}' (FORMAT PARQUET)")
    seen, real_select = [], cli.select

    def recording_select(con, *args, **kwargs):
        seen.append(con.sql("SELECT current_setting('enable_progress_bar')").fetchall()[0][0])
        return real_select(con, *args, **kwargs)

    monkeypatch.setattr(cli, "select", recording_select)
    assert cli.main(["select", str(tmp_path / "in.parquet"), "--epsilon", "1", "--delta", "1e-5", "--seed", "1",
                     "-o", str(tmp_path / "o.parquet"), "--json"]) == 0
    assert seen == [False] and json.loads(capfd.readouterr().out)["released"] >= 0
