"""Session: tight composition, checks before data is read, no refunds, exact charges, and a persisted
ledger that is atomic across connections and detects tampering (issues #12 and #14)."""
import json
import math
from fractions import Fraction

import duckdb
import pytest
from conftest import leftovers, make_table, random_sets, run_together, spend
from dp_accounting import GaussianDpEvent, LaplaceDpEvent
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm

import duckdp
from duckdp import (
    BudgetExceeded,
    DataError,
    InvalidParameter,
    LedgerError,
    SchemaError,
    Session,
)
from duckdp.privacy.accountant import spent_of
from duckdp.privacy.conversions import (
    approx_zcdp_epsilon,
    approx_zcdp_to_dp,
    zcdp_delta,
)

RUN = {"max_contributions": 5, "seed": 1}


@pytest.fixture
def t(con):
    users, items = random_sets(100, 30, 4, 3)
    make_table(con, "t", users, items)
    return con


@pytest.fixture
def db_file(tmp_path) -> str:
    """A database file holding table "t", for ledgers that must outlive a connection."""
    path = str(tmp_path / "db.duckdb")
    with duckdb.connect(path) as con:
        users, items = random_sets(300, 40, 5, 1)
        make_table(con, "t", users, items)
    return path


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ from Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ (Dong, Roth & Su 2022, Cor. 2.13)."""
    return brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta, 0, 50,
                  xtol=1e-13)


# -- composition ----------------------------------------------------------------------------------

def test_zcdp_composes_additively_and_ledger_has_one_row_per_release(t):
    s = Session(t, rho=0.5, delta=1e-5)
    a = s.select("t", algo="weighted_gaussian", rho=0.1, delta=2e-6, **RUN)
    b = s.select("t", algo="dpsips", rho=0.25, delta=3e-6, **RUN)
    c = s.count_release("t", rho=0.05, delta=1e-6, seed=1)
    assert (s.spent.kind, s.spent.value, s.spent.delta) == ("rho", 0.4, 6e-6)   # exact sums, rounded up
    assert s.remaining.value == pytest.approx(0.1) and s.remaining.delta == pytest.approx(4e-6)
    rows = s.ledger.to_pylist()
    assert [r["algo"] for r in rows] == ["weighted_gaussian", "dpsips", "pcr"]
    assert [r["released"] for r in rows] == [len(a), len(b), len(c)]
    assert [r["input"] for r in rows] == ["t"] * 3 and all(r["error"] is None for r in rows)
    assert [r["charge"] for r in rows] == [0.1, 0.25, 0.05]
    assert [len(json.loads(r["events"])) for r in rows] == [1, 3, 1]


def test_all_gaussian_sequence_is_exactly_gdp_and_admits_what_basic_composition_refuses(t):
    """ε = 1, δ = 1e-5: releases at (0.5, 2e-6) each. Basic composition stops after 2; Gaussian DP
    (μ = √Σ μ_i², Dong–Roth–Su Cor. 3.3) admits more, and `spent` is the GDP closed form."""
    s = Session(t, epsilon=1.0, delta=1e-5)
    releases = []
    with pytest.raises(BudgetExceeded, match="Composed  : all .* releases need ε=1.0"):
        for _ in range(10):
            releases.append(s.select("t", algo="weighted_gaussian", epsilon=0.5, delta=2e-6, **RUN))
    assert len(releases) >= 3                                    # basic composition: 2
    mus = [r.sensitivity / r.sigma for rel in releases for r in rel.rounds]
    novel = [r.novel_delta for rel in releases for r in rel.rounds]
    assert novel == [1e-6] * len(releases)                       # δ/2 of each (ε, δ) Gaussian round
    mu = math.sqrt(sum(m * m for m in mus))
    expected = gdp_epsilon(mu, 1e-5 - sum(novel))
    assert s.spent.value == pytest.approx(expected, rel=1e-9) and s.spent.value >= expected * (1 - 1e-12)
    assert s.spent.delta == pytest.approx(sum(novel), rel=1e-15) and s.spent.value <= 1.0
    # the refused next release would need more than ε = 1 by the same closed form
    assert gdp_epsilon(math.sqrt(mu ** 2 + mus[0] ** 2), 1e-5 - sum(novel) - 1e-6) > 1.0
    assert len(s.ledger) == len(releases)


def test_mixed_sequence_matches_dp_accounting_and_beats_basic_composition(t):
    s = Session(t, epsilon=2.0, delta=1e-5)
    rels = [s.select("t", algo="weighted_laplace", epsilon=0.3, delta=1e-6, **RUN),
            s.select("t", algo="weighted_gaussian", epsilon=0.4, delta=1e-6, **RUN),
            s.select("t", algo="dpsips", rho=0.01, delta=1e-6, **RUN),
            s.select("t", algo="count_laplace", epsilon=0.2, delta=1e-6, **RUN)]
    rounds = [r for rel in rels for r in rel.rounds]
    acc = PLDAccountant()                                        # independent: one event per round
    for r in rounds:
        acc.compose((GaussianDpEvent if r.noise == "gaussian" else LaplaceDpEvent)(r.sigma / r.sensitivity))
    novel = 1e-6 / 2 + 1e-6 + 3 * (1e-6 / 3) + 1e-6             # Laplace δ, Gaussian δ/2, zCDP δ_i
    assert s.spent.delta == pytest.approx(novel, rel=1e-12)
    expected = acc.get_epsilon(1e-5 - s.spent.delta)
    assert s.spent.value == pytest.approx(expected, abs=2e-3)
    basic = 0.3 + 0.4 + rels[2].spent.epsilon + 0.2
    assert s.spent.value < basic - 0.3


@pytest.mark.parametrize("algo", ["weighted_gaussian", "weighted_laplace", "dpsips", "count_laplace",
                                  "truncated_geometric"])
def test_a_release_at_the_whole_session_budget_fits(t, algo):
    s = Session(t, epsilon=1.0, delta=1e-5)
    s.select("t", algo=algo, epsilon=1.0, delta=1e-5, max_contributions=2, seed=1)
    assert 0 < s.spent.value <= 1.0 and s.spent.delta <= 1e-5
    with pytest.raises(BudgetExceeded):
        s.select("t", algo=algo, epsilon=0.01, delta=1e-9, max_contributions=2, seed=1)


def test_events_of_releases_and_plans(t):
    from duckdp.privacy.accountant import curves
    from duckdp.privacy.events import DpEvent, GaussianEvent

    wg = duckdp.select(t, "t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)
    (e,) = curves(wg.event)
    assert isinstance(e, GaussianEvent) and e.novel_delta == 1e-6 and Fraction(e.mu) >= 1 / Fraction(wg.rounds[0].sigma)
    assert e.mu == pytest.approx(1 / wg.rounds[0].sigma, rel=1e-15)
    cg = duckdp.select(t, "t", algo="count_gaussian", epsilon=1.0, delta=1e-6, max_contributions=4, seed=1)
    (e,) = curves(cg.event)
    assert e.mu == pytest.approx(2 / cg.rounds[0].sigma, rel=1e-15) and e.novel_delta == 5e-7     # √Δ0 / σ
    tg = duckdp.select(t, "t", algo="truncated_geometric", epsilon=1.0, delta=1e-6, max_contributions=2, seed=1)
    assert curves(tg.event) == [DpEvent(1.0, 1e-6)]
    cr = duckdp.count_release(t, "t", rho=0.05, delta=1e-6, seed=1)
    (e,) = curves(cr.event)
    assert e == DpEvent(cr.spent.epsilon, cr.spent.delta)    # filter's (ρ, δ), Cor. 9


def test_count_release_in_an_eps_session_is_a_generic_event(t):
    s = Session(t, epsilon=1.0, delta=1e-5)
    cr = s.count_release("t", rho=0.01, delta=1e-6, seed=1)
    assert json.loads(s.ledger.column("events")[0].as_py()) == [
        {"type": "dp", "epsilon": cr.spent.epsilon, "delta": cr.spent.delta}]
    assert s.spent.value <= cr.spent.epsilon * (1 + 1e-3) and s.spent.delta == cr.spent.delta


def test_exact_charges_never_decimal(t):
    """0.1 + 0.2 exceeds 0.3 by 2.8e-17 in the floats actually used: the second release is refused."""
    s = Session(t, rho=0.3, delta=1e-5)
    s.select("t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)
    with pytest.raises(BudgetExceeded, match="Requested : ρ=0.2"):
        s.select("t", algo="weighted_gaussian", rho=0.2, delta=1e-6, **RUN)
    assert s.remaining.value == pytest.approx(0.2) and s.remaining.value <= 0.3 - 0.1
    s = Session(t, rho=1.0, delta=1e-5)
    for _ in range(9):
        s.select("t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)
    assert Fraction(s.spent.value) >= 9 * Fraction(0.1)        # rounded up, never below what was used
    with pytest.raises(BudgetExceeded) as err:                   # ten 0.1's are 1 + 5.6e-17 > 1
        s.select("t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)
    assert "Difference: ρ=" in str(err.value)
    s.select("t", algo="weighted_gaussian", rho=0.0999999999999999, delta=1e-6, **RUN)
    assert len(s.ledger) == 10
    with pytest.raises(BudgetExceeded, match="Requested : ρ=1e-09, δ=1e-09"):
        s.select("t", algo="weighted_gaussian", rho=1e-9, delta=1e-9, **RUN)


def test_persisted_events_reload(db_file):
    with duckdb.connect(db_file) as con:
        s = Session(con, epsilon=1.0, delta=1e-5, ledger_table="L")
        s.select("t", algo="weighted_laplace", epsilon=0.2, delta=1e-6, **RUN)
        s.select("t", algo="dpsips", epsilon=0.3, delta=1e-6, **RUN)
        events, spent = s.events, s.spent
    with duckdb.connect(db_file) as con:
        s = Session(con, epsilon=1.0, delta=1e-5, ledger_table="L")
        kinds = [type(e).__name__ for e in events]
        assert s.events == events and s.spent == spent and kinds == ["LaplaceEvent"] + ["GaussianEvent"] * 3
        with pytest.raises(LedgerError, match="different total budget"):
            Session(con, epsilon=2.0, delta=1e-5, ledger_table="L")


# -- checks before data, no refunds, parameters ---------------------------------------------------

def test_budget_is_checked_before_any_data_is_read(t):
    """The view raises as soon as a row is read; an over-budget call must not get that far."""
    t.execute("CREATE VIEW trap AS SELECT * FROM t WHERE error('the data was read')")
    s = Session(t, rho=0.1, delta=1e-6)
    with pytest.raises(BudgetExceeded, match="Requested : ρ=0.2, δ=1e-07"):
        s.select("trap", algo="weighted_gaussian", rho=0.2, delta=1e-7, **RUN)
    assert s.spent.value == 0 and len(s.ledger) == 0 and leftovers(t) == []
    with pytest.raises(duckdb.Error, match="the data was read"):    # within budget: data is read ...
        s.select("trap", algo="weighted_gaussian", rho=0.05, delta=1e-7, **RUN)
    (row,) = s.ledger.to_pylist()                                   # ... so the call is charged
    assert row["charge"] == 0.05 and row["released"] is None and "the data was read" in row["error"]
    assert leftovers(t) == []


def test_no_refund_after_data_is_touched_but_nothing_charged_before(t):
    t.execute("CREATE TABLE n AS SELECT * FROM t UNION ALL SELECT NULL, 'x'")
    s = Session(t, epsilon=1.0, delta=1e-5)
    with pytest.raises(DataError, match="NULL user id"):
        s.select("n", algo="weighted_gaussian", epsilon=0.3, delta=1e-6, **RUN)
    with pytest.raises(SchemaError):
        s.select("t", algo="weighted_gaussian", epsilon=0.3, delta=1e-6, user_col="nope", **RUN)
    with pytest.raises(InvalidParameter):
        s.select("t", algo="weighted_gaussian", epsilon=0.3, delta=1e-6, max_contributions=0)
    (row,) = s.ledger.to_pylist()
    assert row["charge"] == 0.3 and row["error"].startswith("DataError")
    assert 0 < s.spent.value < 0.3 and s.spent.delta == 5e-7        # one Gaussian round, exactly accounted


def test_zcdp_session_refuses_eps_releases(t):
    s = Session(t, rho=1.0, delta=1e-5)
    with pytest.raises(InvalidParameter, match="no sound conversion"):
        s.select("t", algo="weighted_laplace", epsilon=0.1, delta=1e-6, **RUN)
    with pytest.raises(InvalidParameter, match="takes a budget given as epsilon="):
        s.select("t", algo="truncated_geometric", rho=0.1, delta=1e-6, **RUN)
    assert len(s.ledger) == 0


@pytest.mark.parametrize("kwargs", [{}, {"epsilon": 1}, {"epsilon": 1, "rho": 1, "delta": 1e-5},
                                    {"rho": -1, "delta": 1e-5}, {"epsilon": 1, "delta": 2},
                                    {"epsilon": 1, "delta": 1e-5, "ledger_table": ""},
                                    {"epsilon": 1, "delta": 1e-5, "ledger_table": ("a", "b", "c", "d")},
                                    {"epsilon": 1, "delta": 1e-5, "ledger_table": "L", "key": "secret"},
                                    {"epsilon": 1, "delta": 1e-5, "ledger_table": "L", "key": b"short"},
                                    {"epsilon": 1, "delta": 1e-5, "anchor": "a.json"},
                                    {"epsilon": 1, "delta": 1e-5, "ledger_table": "L", "anchor": 3},
                                    {"epsilon": 1, "delta": 1e-5, "ledger_table": "L", "anchor": True},
                                    {"epsilon": 1, "delta": 1e-5, "ledger_table": "L", "adopt": "yes"},
                                    {"epsilon": 1, "delta": 1e-5, "adopt": True}])
def test_bad_session_parameters(con, kwargs):
    with pytest.raises(InvalidParameter):
        Session(con, **kwargs)
    with pytest.raises(InvalidParameter, match="duckdb connection"):
        Session("db", epsilon=1, delta=1e-5)


# -- persisted ledger: restart, atomicity, tampering ----------------------------------------------

def test_ledger_survives_restart(db_file):
    with duckdb.connect(db_file) as con:
        s = Session(con, rho=0.3, delta=1e-5, ledger_table='my "ledger"; --')
        s.select("t", algo="weighted_gaussian", rho=0.2, delta=1e-6, **RUN)
    with duckdb.connect(db_file) as con:
        s = Session(con, rho=0.3, delta=1e-5, ledger_table='my "ledger"; --')
        assert s.spent.value == 0.2 and len(s.ledger) == 1
        with pytest.raises(BudgetExceeded):
            s.select("t", algo="weighted_gaussian", rho=0.2, delta=1e-6, **RUN)
        s.select("t", algo="weighted_gaussian", rho=0.0625, delta=1e-6, **RUN)
        other = Session(con, rho=0.3, delta=1e-5, ledger_table='my "ledger"; --')   # a second handle sees it
        assert other.remaining.value == pytest.approx(0.0375)
    with duckdb.connect(db_file, read_only=True) as con, pytest.raises(LedgerError, match="cannot open ledger table"):
        Session(con, rho=0.3, delta=1e-5, ledger_table='my "ledger"; --')


def _race(sessions, table="t") -> list[bool]:
    """Both sessions spend ρ = 0.6 of 1.0 at the same moment; which succeeded."""
    errors = run_together([lambda s=s: spend(s, 0.6, table) for s in sessions])
    if not all(e is None or isinstance(e, BudgetExceeded) for e in errors):
        raise next(e for e in errors if e is not None and not isinstance(e, BudgetExceeded))
    return [e is None for e in errors]


@pytest.mark.parametrize("mode", ["two connections to one file", "two cursors of one connection"])
def test_check_and_charge_is_atomic_across_sessions(tmp_path, mode):
    """Issue #14.1: two Sessions on one ledger spending 0.6 each of 1.0 concurrently: exactly one wins."""
    path = str(tmp_path / "db.duckdb")
    with duckdb.connect(path) as setup:
        users, items = random_sets(200, 30, 4, 2)
        make_table(setup, "t", users, items)
    for trial in range(10):
        first = duckdb.connect(path)
        second = duckdb.connect(path) if mode.startswith("two connections") else first.cursor()
        cons = [first.cursor(), second] if mode.startswith("two cursors") else [first, second]
        name = f"L{trial}"
        sessions = [Session(c, rho=1.0, delta=1e-5, ledger_table=name) for c in cons]
        assert sorted(_race(sessions)) == [False, True], f"trial {trial}"
        rows = Session(first, rho=1.0, delta=1e-5, ledger_table=name).ledger.to_pylist()
        assert [r["seq"] for r in rows] == [0] and rows[0]["charge"] == 0.6
        for c in {id(c): c for c in cons + [second, first]}.values():
            c.close()


def test_concurrent_charges_under_budget_all_land_in_order(t):
    """Eight sessions on one ledger each spend 0.1 of 1.0 at once: all succeed, seq 0..7, chain intact."""
    sessions = [Session(t.cursor(), rho=1.0, delta=1e-5, ledger_table="L") for _ in range(8)]
    assert run_together([lambda s=s: spend(s, 0.1) for s in sessions]) == [None] * 8
    s = Session(t, rho=1.0, delta=1e-5, ledger_table="L")
    assert [r["seq"] for r in s.ledger.to_pylist()] == list(range(8))
    assert s.spent.value == pytest.approx(0.8)


def _two_charges(con, **kw) -> Session:
    s = Session(con, rho=1.0, delta=1e-5, ledger_table="L", **kw)
    spend(s, 0.1)
    spend(s, 0.2)
    return s


HEAD = '"L__duckdp_head"'
TAMPER = [
    ("UPDATE L SET charge = -0.1 WHERE seq = 1", "altered"),
    ("UPDATE L SET charge = 0.01, spent = 0.11 WHERE seq = 1", "altered"),
    ("UPDATE L SET algo = 'nothing' WHERE seq = 0", "altered"),
    ("UPDATE L SET input = 'other' WHERE seq = 1", "altered"),
    ("UPDATE L SET events = '[]' WHERE seq = 1", "altered"),
    ("UPDATE L SET budget = 5.0", "altered"),
    ("DELETE FROM L WHERE seq = 0", "sequence numbers"),
    ("DELETE FROM L WHERE seq = 1", "rows were deleted"),               # issue #14.2: from the end
    ("DELETE FROM L", "rows were deleted"),                             # issue #14.2: the whole table
    ("INSERT INTO L SELECT * FROM L WHERE seq = 1", "sequence numbers"),
    ("UPDATE L SET released = -3 WHERE seq = 0", "negative released"),
    ("ALTER TABLE L ADD COLUMN note VARCHAR", "not a duckdp ledger"),
    (f"INSERT INTO {HEAD} SELECT * FROM {HEAD}", "has 2 rows"),
    (f"DELETE FROM {HEAD}", "has 0 rows"),
    (f"UPDATE {HEAD} SET count = 1", "rows were deleted"),
]


@pytest.mark.parametrize("statement, message", TAMPER)
def test_tampered_ledger_is_refused(t, statement, message):
    s = _two_charges(t)
    t.execute(statement)
    with pytest.raises(LedgerError, match=message):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L")
    with pytest.raises(LedgerError):               # an open session re-verifies before charging
        s.select("t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)
    with pytest.raises(LedgerError):
        _ = s.spent


def test_dropped_ledger_table_is_refused(t):
    s = _two_charges(t)
    t.execute("DROP TABLE L")
    with pytest.raises(LedgerError, match="missing"):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L")
    with pytest.raises(LedgerError, match="dropped"):
        s.select("t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)


def _truncate_and_fix_head(con):
    """Delete the last row and rewrite the head to match what is left (anyone can compute SHA-256)."""
    (chain,), = con.execute("SELECT chain FROM L WHERE seq = 0").fetchall()
    con.execute("DELETE FROM L WHERE seq = 1")
    con.execute(f"UPDATE {HEAD} SET count = 1, chain = $c", {"c": chain})


def test_key_detects_a_truncation_with_a_rewritten_head(t):
    _two_charges(t)
    _truncate_and_fix_head(t)                      # without a key this is the documented limit ...
    assert Session(t, rho=1.0, delta=1e-5, ledger_table="L").spent.value == 0.1
    t.execute("DROP TABLE L; DROP TABLE " + HEAD)
    key = b"k" * 32
    _two_charges(t, key=key)
    _truncate_and_fix_head(t)                      # ... with the owner's key the head's MAC fails
    with pytest.raises(LedgerError, match="MAC"):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L", key=key)
    with pytest.raises(LedgerError, match="is keyed"):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L")
    with pytest.raises(LedgerError, match="MAC"):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L", key=b"x" * 32)


def test_keyed_rows_cannot_be_recomputed(t):
    _two_charges(t, key=b"k" * 32)
    t.execute("UPDATE L SET charge = 0.01 WHERE seq = 1")
    with pytest.raises(LedgerError, match="altered"):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L", key=b"k" * 32)


def test_anchor_detects_deleting_both_tables_and_truncation(t, tmp_path):
    anchor = tmp_path / "ledger.anchor"
    _two_charges(t, anchor=anchor)
    assert json.loads(anchor.read_text())["count"] == 2
    _truncate_and_fix_head(t)                      # the guard's key makes the rewritten head's MAC fail
    with pytest.raises(LedgerError, match="MAC"):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L", anchor=anchor)
    t.execute("DROP TABLE L; DROP TABLE " + HEAD)
    with pytest.raises(LedgerError, match="the ledger was deleted"):
        Session(t, rho=1.0, delta=1e-5, ledger_table="L", anchor=anchor)
    # an in-memory database has no default guard: both tables gone is a fresh ledger (it dies with the process)
    assert Session(t, rho=1.0, delta=1e-5, ledger_table="L").spent.value == 0


def test_forged_events_with_a_recomputed_chain_still_must_fit(t):
    """Without a key anyone can recompute the chain; the events are re-composed against the budget."""
    from duckdp.ledger import chain_of

    s = Session(t, epsilon=1.0, delta=1e-5, ledger_table="L")
    s.select("t", algo="weighted_gaussian", epsilon=0.5, delta=1e-6, **RUN)
    (row,) = t.sql("SELECT * FROM L").to_arrow_table().to_pylist()
    (ledger_id,), = t.execute(f"SELECT ledger_id FROM {HEAD}").fetchall()
    row["events"] = '[{"type":"gaussian","mu":5.0,"delta":5e-07}]'
    chain = chain_of(None, ledger_id, row)
    t.execute("UPDATE L SET events = $e, chain = $c", {"e": row["events"], "c": chain})
    t.execute(f"UPDATE {HEAD} SET chain = $c", {"c": chain})
    with pytest.raises(LedgerError, match="exceed the budget"):
        Session(t, epsilon=1.0, delta=1e-5, ledger_table="L")


def test_existing_table_that_is_not_a_ledger(t):
    with pytest.raises(LedgerError, match="missing"):
        Session(t, epsilon=1.0, delta=1e-5, ledger_table="t")
    assert t.sql("SELECT count(*) FROM t").fetchall()[0][0] > 0


def test_outcome_columns_do_not_alter_charges(t):
    """`released`/`error` record what happened; editing them is allowed and never changes a charge."""
    s = Session(t, rho=1.0, delta=1e-5, ledger_table="L")
    s.select("t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)
    t.execute("UPDATE L SET released = NULL, error = 'note'")
    assert Session(t, rho=1.0, delta=1e-5, ledger_table="L").spent.value == 0.1


# -- the conversions the session charges with (DP-SIPS Cor. 9, CKS Prop. 7) ------------------------

RHO = st.floats(1e-4, 1e3)
SMALL_DELTA = st.floats(1e-15, 1e-2)   # larger δ with tiny ρ crashes approx_zcdp_epsilon (reported)
SLACK = 1 + 1e-9                        # bounded scalar minimisation, xatol 1e-10


@settings(max_examples=40, deadline=None)
@given(rho=RHO, eps=st.floats(1e-3, 50), f=st.floats(1.0, 4.0))
def test_zcdp_delta_monotone(rho, eps, f):
    d = zcdp_delta(rho, eps)[0]
    assert 0 <= d <= 1 and math.isfinite(d)
    assert zcdp_delta(rho, eps * f)[0] <= d * SLACK + 1e-300          # decreasing in ε
    assert zcdp_delta(rho * f, eps)[0] * SLACK + 1e-300 >= d          # increasing in ρ


@settings(max_examples=40, deadline=None)
@given(rho=RHO, delta=SMALL_DELTA, f=st.floats(1.0, 4.0))
@example(rho=1e-4, delta=1e-6, f=1.0)     # δ' underflowed to 0 here (log(0) in approx_zcdp_epsilon)
def test_zcdp_charge_is_finite_and_monotone(rho, delta, f):
    s = spent_of([duckdp.ZCDP(rho, delta)])
    assert math.isfinite(s.epsilon) and s.epsilon > 0 and s.delta == delta + (1 - delta) * delta
    assert approx_zcdp_to_dp(rho, delta, s.epsilon) <= s.delta * SLACK          # the charge is sound
    assert approx_zcdp_epsilon(rho * f, delta, s.delta) * SLACK >= s.epsilon     # more ρ, more ε
    wider = min(s.delta * f, 0.5)
    assert approx_zcdp_epsilon(rho, delta, wider) <= s.epsilon * SLACK          # more δ_DP, less ε
