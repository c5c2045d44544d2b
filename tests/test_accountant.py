"""The accountant (privacy/accountant.py): check → commit, spent, remaining, one ledger row type.

One suite of behaviours every accountant implements (the dp_accounting `PrivacyAccountantTest`
pattern), one subclass per budget kind; plus `accountant=` on `select` and `count_release`.
"""
from __future__ import annotations

import math

import pytest

import duckdp
from duckdp.errors import BudgetExceeded, LedgerError, UnsupportedEventError
from duckdp.mechanisms.base import Params
from duckdp.privacy.accountant import (
    Accountant,
    LedgerEntry,
    PldAccountant,
    ZcdpAccountant,
    curves,
    nominal_spent,
)
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.calibration import analytic_gaussian_sigma
from duckdp.privacy.events import (
    CalibratedEvent,
    ComposedEvent,
    DpEvent,
    GaussianEvent,
    ZcdpEvent,
    dumps,
    loads,
)


class AccountantSuite:
    budget: EpsDelta | ZCDP
    small: object          # an event that fits the budget several times
    big: object            # an event that never fits
    cls: type

    def make(self) -> Accountant:
        return Accountant.for_budget(self.budget)

    def test_for_budget_picks_the_kind(self):
        assert type(self.make()) is self.cls

    def test_check_changes_nothing_and_commit_records_one_entry(self):
        acc = self.make()
        assert acc.check(self.small) and acc.entries == [] and acc.spent.value == 0.0
        entry = acc.commit(self.small, label="x", input="t")
        assert isinstance(entry, LedgerEntry) and acc.entries == [entry] and entry.seq == 0
        assert entry.algo == "x" and entry.input == "t" and 0 < acc.spent.value <= acc.total
        assert acc.remaining.value < acc.total

    def test_over_budget_raises_and_leaves_state_unchanged(self):
        acc = self.make()
        acc.commit(self.small)
        before = (acc.entries, acc.spent, acc.remaining)
        assert not acc.check(self.big)
        with pytest.raises(BudgetExceeded):
            acc.commit(self.big)
        assert (acc.entries, acc.spent, acc.remaining) == before

    def test_commits_until_full(self):
        acc = self.make()
        n = 0
        while acc.check(self.small):
            acc.commit(self.small)
            n += 1
            assert n < 1000
        assert n >= 2 and acc.spent.value <= acc.total and acc.spent.delta <= self.budget.delta
        with pytest.raises(BudgetExceeded):
            acc.commit(self.small)

    def test_verify_accepts_own_rows_and_refuses_another_budget(self):
        acc = self.make()
        acc.commit(self.small)
        rows = [e.as_row() for e in acc.entries]
        acc.verify(rows)
        other = Accountant.for_budget(type(self.budget)(0.123, self.budget.delta))
        with pytest.raises(LedgerError, match="different total budget"):
            other.verify(rows)


class TestPld(AccountantSuite):
    budget = EpsDelta(1.0, 1e-5)
    # a Gaussian round calibrated to (0.2, 1e-7): μ from the analytic Gaussian at (0.2, δ/2) (Balle & Wang Thm 8)
    small = CalibratedEvent(GaussianEvent(1 / analytic_gaussian_sigma(0.2, 5e-8), 5e-8), EpsDelta(0.2, 1e-7))
    big = DpEvent(2.0, 1e-7)
    cls = PldAccountant

    def test_tight_composition_beats_basic(self):
        """Gaussian rounds compose as √Σμ², so more than 1/0.2 = 5 rounds of nominal ε = 0.2 fit."""
        acc = self.make()
        n = 0
        while acc.check(self.small):
            acc.commit(self.small)
            n += 1
        assert n > 5

    def test_zcdp_event_is_charged_at_its_conversion(self):
        acc = self.make()
        entry = acc.commit(ZcdpEvent(0.01, 1e-6))
        spent = nominal_spent(ZcdpEvent(0.01, 1e-6))
        assert loads(entry.events) == [DpEvent(spent.epsilon, spent.delta)]     # DP-SIPS Cor. 9


class TestZcdp(AccountantSuite):
    budget = ZCDP(0.5, 1e-5)
    small = ZcdpEvent(0.1, 1e-6)
    big = ZcdpEvent(0.6, 1e-6)
    cls = ZcdpAccountant

    def test_exact_sums(self):
        acc = Accountant.for_budget(ZCDP(0.3, 1e-5))
        acc.commit(ZcdpEvent(0.1, 1e-6))
        assert not acc.check(ZcdpEvent(0.2, 1e-6))     # 0.1 + 0.2 > 0.3 exactly (by 2.8e-17)
        acc.commit(ZcdpEvent(0.125, 1e-6))
        assert acc.spent.value == 0.225 and acc.spent.delta == 2e-6

    def test_eps_events_are_unsupported(self):
        acc = self.make()
        assert not acc.check(DpEvent(0.1, 1e-6))
        with pytest.raises(UnsupportedEventError, match="no sound conversion"):
            acc.commit(ComposedEvent((ZcdpEvent(0.1, 1e-6), DpEvent(0.1, 1e-6))))
        assert acc.entries == []


def test_old_ledger_events_still_load():
    """Rows written before the accountant (curve JSON only) read back unchanged."""
    old = '[{"type":"gaussian","mu":0.5,"delta":1e-06},{"type":"laplace","epsilon":0.2,"delta":0.0},' \
          '{"type":"dp","epsilon":1.0,"delta":1e-07}]'
    assert dumps(loads(old)) == old


@pytest.fixture
def con(con):
    """conftest's connection with a small table t."""
    con.execute("CREATE TABLE t AS SELECT (i % 300) AS user_id, (i % 7) AS item FROM range(3000) r(i)")
    return con


def test_a_user_accountant_budgets_several_selects(con):
    acc = Accountant.for_budget(EpsDelta(1.0, 1e-5))
    r1 = duckdp.select(con, "t", algo="dpsips", epsilon=0.5, delta=5e-6, max_contributions=2, seed=1,
                       accountant=acc)
    duckdp.select(con, "t", algo="weighted_gaussian", epsilon=0.4, delta=4e-6, max_contributions=2, seed=1,
                  accountant=acc)
    assert [e.algo for e in acc.entries] == ["dpsips", "weighted_gaussian"]
    assert acc.entries[0].events == dumps(curves(r1.event))
    with pytest.raises(BudgetExceeded):
        duckdp.select(con, "t", algo="dpsips", epsilon=0.9, delta=1e-6, max_contributions=2, seed=1,
                      accountant=acc)
    assert len(acc.entries) == 2


def test_count_release_commits_its_filter_guarantee(con):
    acc = Accountant.for_budget(ZCDP(1.0, 1e-5))
    cr = duckdp.count_release(con, "t", rho=0.4, delta=1e-6, seed=1, accountant=acc)
    (entry,) = acc.entries
    assert (entry.algo, entry.charge, entry.charge_delta) == ("pcr", 0.4, 1e-6)
    assert loads(entry.events) == [ZcdpEvent(0.4, 1e-6)] and cr.event == ZcdpEvent(0.4, 1e-6)
    # its steps went through a filter accountant: the step ledger never exceeds the guarantee
    assert cr.ledger_rho <= 0.4 and cr.ledger_delta <= 1e-6


def test_accountant_must_be_an_accountant(con):
    with pytest.raises(duckdp.errors.InvalidParameter, match="accountant"):
        duckdp.select(con, "t", algo="dpsips", epsilon=0.5, delta=5e-6, max_contributions=2, seed=1,
                      accountant=object())


def test_internal_invariants_raise_internal_error():
    """Invariants raise InternalError (a DuckDPError and a RuntimeError), not `assert` (gone under -O)."""
    import dataclasses

    from duckdp.errors import DuckDPError, InternalError
    from duckdp.mechanisms import get
    from duckdp.privacy import auto_contributions as ac

    assert issubclass(InternalError, DuckDPError) and issubclass(InternalError, RuntimeError)
    mech = get("dpsips")
    params = mech.check_params({})
    budget = EpsDelta(1.0, 1e-5)
    auto, plan = ac.plan(budget, ac.DEFAULT_SHARE, lambda b, d: mech.plan(b, Params(d, params)))
    choice = ac.AutoChoice(5, auto)
    # a charged plan whose events differ from the mechanism's at the chosen Δ0
    charged = [dataclasses.replace(p, scale=p.scale * 2) for p in plan]
    with pytest.raises(InternalError, match="privacy events changed"):
        ac.finish(choice, charged, lambda b, d: mech.plan(b, Params(d, params)))


@pytest.mark.parametrize("name", ["Z", "E"])
def test_ledger_written_before_the_accountant_reopens(con, name):
    """tests/data/ledger_v1.json: rows and head written by the Session before the accountant (commit
    759c3f3: a zCDP and an (ε, δ) ledger, each with a DP-SIPS and a count release). They verify, their
    totals read back unchanged and new releases are charged on top."""
    import datetime
    import json
    from pathlib import Path

    from duckdp.ledger import COLUMNS, HEAD_COLUMNS

    saved = json.loads((Path(__file__).parent / "data" / "ledger_v1.json").read_text())[name]
    con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in COLUMNS)})")
    con.execute(f"CREATE TABLE {name}__duckdp_head ({', '.join(f'{c} {t}' for c, t in HEAD_COLUMNS)})")
    for row in saved["rows"]:
        row = row | {"time": datetime.datetime.fromisoformat(row["time"])}
        con.execute(f"INSERT INTO {name} VALUES ({', '.join('$' + c for c, _ in COLUMNS)})", row)
    con.execute(f"INSERT INTO {name}__duckdp_head VALUES ($ledger_id, $count, $chain, $mac)", saved["head"][0])
    s = duckdp.Session(con, ledger_table=name, anchor=False, **saved["budget"])
    assert [s.spent.value, s.spent.delta] == saved["spent"] and len(s.ledger) == 2
    if name == "Z":
        s.count_release("t", rho=0.1, delta=1e-6, seed=2)
        assert s.spent.value == pytest.approx(saved["spent"][0] + 0.1, rel=1e-15)
    else:
        s.select("t", algo="dpsips", epsilon=0.1, delta=1e-6, max_contributions=2, seed=2)
        assert s.spent.value > saved["spent"][0]
    assert len(duckdp.Session(con, ledger_table=name, anchor=False, **saved["budget"]).ledger) == 3


def test_fixed_point_sums_are_exact():
    """The zCDP accountant's integer sums (units of 2⁻¹⁰⁷⁴) round up exactly like Fraction sums."""
    import random
    from fractions import Fraction

    from duckdp.privacy.accountant import _fixed, _fixed_up

    rng = random.Random(7)
    for _ in range(5000):
        xs = [rng.random() * 10.0 ** rng.randint(-320, 300) for _ in range(rng.randint(1, 6))] + [5e-324]
        exact = sum(map(Fraction, xs), Fraction(0))
        up = _fixed_up(sum(map(_fixed, xs)))
        assert Fraction(up) >= exact and (up == 0 or Fraction(math.nextafter(up, -math.inf)) < exact)
