"""The engine registry and mechanisms' declared engines (issue #19): one `engine_for(con)`, and a
mechanism refused on an engine it does not declare before any budget is charged or data read."""
from __future__ import annotations

import duckdb
import pytest

import duckdp
from duckdp.engines import engine_for
from duckdp.errors import InvalidParameter
from duckdp.mechanisms import MECHANISMS, get
from duckdp.privacy.budget import EpsDelta
from duckdp.templates import template_files

GOOD = {"epsilon": 1.0, "delta": 1e-6, "max_contributions": 5, "user_col": "user_id", "item_col": "item"}


def test_engine_for_picks_duckdb_and_refuses_other_objects():
    assert engine_for(duckdb.connect()).name == "duckdb"
    with pytest.raises(InvalidParameter, match="duckdb connection or a SparkSession"):
        engine_for("not a connection")


def test_every_mechanism_declares_engines_with_their_own_stages():
    """A declared engine has the family's stage module; the sequential policies declare DuckDB only."""
    for mech in MECHANISMS.values():
        assert set(mech.engines) <= {"duckdb", "spark"} and mech.engines, mech.name
    assert {m.name for m in MECHANISMS.values() if "spark" not in m.engines} == {
        "policy_laplace", "policy_gaussian", "policy_gaussian_l1", "gw"}


def test_undeclared_engine_is_refused_before_the_charge(monkeypatch):
    """A mechanism that does not list DuckDB is refused on DuckDB before its accountant (a Session's too) is charged."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range % 7 AS user_id, range % 3 AS item FROM range(50)")
    mech = get("mad")
    monkeypatch.setattr(type(mech), "engines", ("spark",), raising=False)
    accountant = duckdp.Accountant.for_budget(EpsDelta(2.0, 1e-5))
    with pytest.raises(InvalidParameter, match="mad runs only on spark, not on duckdb"):
        duckdp.select(con, "t", algo="mad", accountant=accountant, **GOOD)
    assert accountant.entries == []
    session = duckdp.Session(con, epsilon=2.0, delta=1e-5)
    with pytest.raises(InvalidParameter):
        session.select("t", algo="mad", epsilon=1.0, delta=1e-6, max_contributions=5)
    assert session.spent.value == 0


def test_mechanism_templates_are_found_in_their_folders():
    """Template lookup covers the mechanism folders (one name, one file)."""
    files = template_files()
    assert files["mad_weights"].parent.parent.name == "mad"
    assert files["stage_pairs"].parent.name == "sql"
    assert files["pcr_top_counts"].parent.parent.name == "count_release"


def test_a_familys_own_stages_take_the_same_arguments_on_every_engine():
    """A mechanism's `run` calls its own stages engine-blind (`own.remaining(stages, pairs, state, salt, lazy)`),
    so each Spark stage takes the DuckDB stage's parameters, by name and order, even one only DuckDB reads
    (adaptive SIPS's `salt` orders the lazy-noise candidates, which Spark, drawing noise eagerly, has none of);
    DuckDB may add helpers of its own."""
    import importlib
    import inspect
    from pathlib import Path

    import duckdp.mechanisms

    pytest.importorskip("pyspark")
    folders = sorted(p.parent.name for p in Path(duckdp.mechanisms.__file__).parent.glob("*/spark.py"))
    assert {"adaptive_sips", "mad", "aggregate"} <= set(folders)

    def stages(module):
        return {n: [p for p in inspect.signature(f).parameters][1:] for n, f in vars(module).items()
                if inspect.isfunction(f) and f.__module__ == module.__name__ and not n.startswith("_")}

    for folder in folders:
        duck, spark = (stages(importlib.import_module(f"duckdp.mechanisms.{folder}.{e}")) for e in ("duckdb", "spark"))
        assert {n: duck.get(n) for n in spark} == spark, folder
