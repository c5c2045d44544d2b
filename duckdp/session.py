"""Session: one total privacy budget spent over many releases, with a ledger that can be persisted.

Accounting (privacy/accounting.py). Every release is recorded as privacy events of its rounds:
Gaussian rounds as μ-GDP (μ = sensitivity/σ), Laplace rounds as Laplace curves, anything else as a
generic (ε, δ) pair, each with the δ its threshold spends on novel keys.

- An (ε, δ) session composes all events tightly: all-Gaussian sequences exactly as Gaussian DP,
  μ = √(Σ μ_i²) (Dong, Roth & Su 2022, Cor. 3.3), converted to (ε, δ) by the GDP δ(ε) formula
  (their Cor. 2.13), mixed sequences with a pessimistic privacy-loss distribution (dp_accounting),
  plus Σ δ_i of the novel-key events. A release is admitted iff the composition of every event
  so far and its own is (ε, δ)-DP at the session's (ε, δ). `spent` is the smallest ε at the
  session's δ and the Σ δ_i; `remaining` is the ε left at that δ. zCDP releases in an (ε, δ)
  session are Gaussian rounds too (σ = Δ/√(2ρ)), so they compose exactly; a count release is
  charged at its (ε, δ) conversion (DP-SIPS Cor. 9) as a generic event.
- A zCDP session (rho=, delta=) adds ρ and δ (Bun & Steinke 2016, Lemma 8.2; DP-SIPS Lemma 6),
  which is tight for zCDP. It refuses (ε, δ) releases: no conversion from (ε, δ)-DP to approximate
  zCDP is established in the papers duckdp cites, so there is no justified charge.

Exact charges: ρ, δ and Σ δ_i are summed exactly (as the binary fractions the floats are) and
rounded up, never as decimals, so 0.1 + 0.2 does not fit a 0.3 budget (it is 2.8e-17 more).

Order of events in a call: the release is checked against the ledger once its plan is known and its
input resolved, before any data is read (BudgetExceeded); it is recorded in the same step, so a
call that then fails or is interrupted is still charged (no refunds once data may have been touched).

Persistence (`ledger_table=`, duckdp/ledger.py): check-and-charge is one DuckDB transaction that
conflicts with any concurrent one on the same ledger (other Sessions, cursors or connections), is
retried from the re-read ledger and refused after repeated conflicts. A head record (row count and
last chain hash) detects rows deleted from the end or a deleted table; the guard file outside the
database (a random HMAC key and the last head; on by default for database files) detects edits,
resets and dropped tables — see the README's threat model.
"""
from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass
from fractions import Fraction

import duckdb
import pyarrow as pa

from . import mechanisms
from .api import select as _select
from .count_release import CountRelease
from .count_release import count_release as _count_release
from .errors import BudgetExceeded, InvalidParameter
from .ledger import COLUMNS, LedgerError, MemoryLedger, TableLedger, table_parts
from .privacy import accounting
from .privacy.budget import ZCDP, Budget, EpsDelta, make_budget
from .release import Release, Spent
from .spark import is_spark_session


@dataclass(frozen=True)
class Amount:
    """An amount of budget in the session's units: `kind` is "epsilon" or "rho", plus δ."""

    kind: str
    value: float
    delta: float

    def as_dict(self) -> dict:
        return {self.kind: self.value, "delta": self.delta}

    def __str__(self) -> str:
        return f"{'ε' if self.kind == 'epsilon' else 'ρ'}={self.value:.6g}, δ={self.delta:.6g}"


_SCHEMA = pa.schema([(c, {"BIGINT": pa.int64(), "TIMESTAMP": pa.timestamp("us"), "VARCHAR": pa.string(),
                          "DOUBLE": pa.float64()}[t]) for c, t in COLUMNS])


def _exact(values) -> Fraction:
    return sum(map(Fraction, values), Fraction(0))


def _up(x: Fraction) -> float:
    """The float nearest above (or equal to) the exact value x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def _down(x: Fraction) -> float:
    f = float(x)
    return f if Fraction(f) <= x else math.nextafter(f, -math.inf)


def _budget_str(b: Budget) -> str:
    return f"ρ={b.rho:.6g}, δ={b.delta:.6g} (zCDP)" if isinstance(b, ZCDP) else f"ε={b.epsilon:.6g}, δ={b.delta:.6g}"


class Session:
    """A total budget for many releases on one connection: `select`, `count_release`, `ledger`.

    `Session(con, epsilon=1, delta=1e-6)` or `Session(con, rho=0.5, delta=1e-6)`. With
    `ledger_table="name"` (or a (schema, table) / (database, schema, table) tuple) the ledger is
    kept in that DuckDB table so the budget survives restarts and is shared, atomically, by every
    Session on it; reopening with a different total budget, or a ledger that fails verification,
    raises LedgerError. A ledger in a database file is guarded by a file outside the database
    (duckdp/ledger_guard.py: a random HMAC key and the last head, in the user's config directory);
    `anchor=` puts the guard at another path, `anchor=False` opts out (throw-away ledgers).
    `key=` (bytes, ≥ 16) keys the chain with the owner's key instead (the guard then holds no key).
    `adopt=True` accepts a ledger found without its guard (legacy, moved, or guard lost) after
    verifying what can be verified, and writes a new guard. Releases run on `con`:
    for concurrent releases give each thread its own Session on its own cursor (`con.cursor()`).
    `con` may be a SparkSession (releases run on Spark); its ledger is then in memory.
    """

    def __init__(self, con, *, epsilon: float | None = None, delta: float | None = None,
                 rho: float | None = None, ledger_table: str | tuple | list | None = None,
                 key: bytes | None = None, anchor: str | os.PathLike | bool | None = None, adopt: bool = False):
        if not (isinstance(con, duckdb.DuckDBPyConnection) or is_spark_session(con)):
            raise InvalidParameter(f"con must be a duckdb connection or a SparkSession, got {type(con).__name__}")
        if ledger_table is not None and is_spark_session(con):
            raise InvalidParameter("ledger_table keeps the ledger in a DuckDB table; with a SparkSession the "
                                   "ledger is in memory (persist `session.ledger` yourself)")
        self._con = con
        self.budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
        self._kind = "epsilon" if isinstance(self.budget, EpsDelta) else "rho"
        self._total = self.budget.epsilon if isinstance(self.budget, EpsDelta) else self.budget.rho
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise InvalidParameter("key must be bytes of length >= 16 (e.g. os.urandom(32)), kept by the owner")
        if anchor is not None and anchor is not False and not isinstance(anchor, (str, os.PathLike)):
            raise InvalidParameter(f"anchor must be a file path or False (no guard file), got {anchor!r}")
        if not isinstance(adopt, bool):
            raise InvalidParameter(f"adopt must be True or False, got {adopt!r}")
        if ledger_table is None:
            if anchor is not None or adopt:
                raise InvalidParameter("anchor= and adopt= need ledger_table= (an in-memory ledger has no guard)")
            self._ledger: MemoryLedger | TableLedger = MemoryLedger(key)
        else:
            table_parts(ledger_table)
            self._ledger = TableLedger(con, ledger_table, check=self._verify, key=key, anchor=anchor, adopt=adopt)

    # -- public -----------------------------------------------------------------------------------
    @property
    def spent(self) -> Amount:
        """Budget charged so far (every recorded release, including failed ones): for an (ε, δ)
        session the composed ε at the session's δ, and the novel-key δ's."""
        rows = self._ledger.rows()
        return Amount(self._kind, rows[-1]["spent"] if rows else 0.0, rows[-1]["spent_delta"] if rows else 0.0)

    @property
    def remaining(self) -> Amount:
        """What is left: ρ and δ (zCDP), or the ε left at the session's δ and the δ left for novel keys."""
        return self._remaining_of(self._ledger.rows())

    @property
    def events(self) -> list:
        """Every charged privacy event, in order (privacy/accounting.py)."""
        return [e for r in self._ledger.rows() for e in accounting.loads(r["events"])]

    @property
    def ledger(self) -> pa.Table:
        """One row per charged release: time (UTC), algo, request, input, events (JSON), charge,
        running totals, released key count (NULL if the call failed, with `error` saying why)."""
        return pa.Table.from_pylist(self._ledger.rows(), schema=_SCHEMA)

    def select(self, table, *, algo: str, epsilon: float | None = None, delta: float | None = None,
               rho: float | None = None, **kwargs) -> Release:
        """`duckdp.select` on the session's connection, charged to the session's budget."""
        if self._kind == "rho" and epsilon is not None:
            raise InvalidParameter(self._refuse_eps())
        return self._run(lambda hook: _select(self._con, table, algo=algo, epsilon=epsilon, delta=delta, rho=rho,
                                              _on_plan=hook, **kwargs),
                         lambda: mechanisms.get(algo).name)

    def count_release(self, table, *, rho: float, delta: float, **kwargs) -> CountRelease:
        """`duckdp.count_release` on the session's connection, charged to the session's budget."""
        return self._run(lambda hook: _count_release(self._con, table, rho=rho, delta=delta, _on_plan=hook,
                                                     **kwargs), lambda: "pcr")

    def __repr__(self) -> str:
        return f"<Session {_budget_str(self.budget)}: spent {self.spent}, remaining {self.remaining}>"

    # -- charging ---------------------------------------------------------------------------------
    def _refuse_eps(self) -> str:
        return ("this session's budget is zCDP (rho=); an (ε, δ)-DP release has no sound conversion to "
                "approximate zCDP, so it cannot be charged: pass rho= to a mechanism that takes it, or open "
                "the session with epsilon=")

    def _run(self, call, algo_name):
        charged: list[dict] = []

        def hook(plan, description):
            charged.append(self._ledger.append(lambda rows: self._charge(rows, algo_name(), plan, description)))

        try:
            release = call(hook)
        except BaseException as exc:
            if charged:
                self._ledger.finish(charged[0]["seq"], None, f"{type(exc).__name__}: {exc}"[:500])
            raise
        self._ledger.finish(charged[0]["seq"], len(release), None)
        return release

    def _charge(self, rows: list[dict], algo: str, plan: list, description: str) -> dict:
        """The new ledger row for a release with this plan, or BudgetExceeded (nothing recorded)."""
        budgets = [p if isinstance(p, (EpsDelta, ZCDP)) else p.budget for p in plan]
        events = accounting.events_of(plan)
        if self._kind == "rho":
            zcdp = [b for b in budgets if isinstance(b, ZCDP)]
            if len(zcdp) != len(budgets):
                raise InvalidParameter(self._refuse_eps())
            charge, charge_delta = _up(_exact(b.rho for b in zcdp)), _up(_exact(b.delta for b in zcdp))
            request = f"ρ={charge:.6g}, δ={charge_delta:.6g} (zCDP)"
            total = _exact([r["charge"] for r in rows] + [charge])
            total_delta = _exact([r["charge_delta"] for r in rows] + [charge_delta])
            fits = total <= Fraction(self._total) and total_delta <= Fraction(self.budget.delta)
            spent, spent_delta, need = _up(total), _up(total_delta), ""
        else:
            alone = Spent.of(budgets)
            charge, charge_delta = alone.epsilon, alone.delta
            request = f"ε={alone.epsilon:.6g}, δ={alone.delta:.6g} alone ({len(events)} event(s))"
            history = [e for r in rows for e in accounting.loads(r["events"])] + events
            fits = accounting.admits(history, self._total, self.budget.delta)
            spent = accounting.composed_epsilon(history, self.budget.delta)
            spent_delta = accounting.extra_delta(history)
            need = (f"  Composed  : all {len(rows) + 1} releases need ε={spent:.6g} at δ={self.budget.delta:.6g} "
                    f"(novel-key δ {spent_delta:.6g}; exact composition)")
        if not fits:
            left = self._remaining_of(rows)
            over = Amount(self._kind, max(charge - left.value, 0.0), max(charge_delta - left.delta, 0.0))
            raise BudgetExceeded("\n".join([
                f"{algo} would exceed the session budget {_budget_str(self.budget)}",
                f"  Requested : {Amount(self._kind, charge, charge_delta)}   [{request}]",
                f"  Remaining : {left}", need or f"  Difference: {over} over"]))
        return {"time": datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None), "algo": algo,
                "request": request, "input": description, "events": accounting.dumps(events),
                "charge": charge, "charge_delta": charge_delta, "spent": spent, "spent_delta": spent_delta,
                "budget_kind": self._kind, "budget": self._total, "budget_delta": self.budget.delta}

    def _remaining_of(self, rows: list[dict]) -> Amount:
        value, delta = (rows[-1]["spent"], rows[-1]["spent_delta"]) if rows else (0.0, 0.0)
        if not math.isfinite(value):
            return Amount(self._kind, 0.0, 0.0)
        return Amount(self._kind, max(_down(Fraction(self._total) - Fraction(value)), 0.0),
                      max(_down(Fraction(self.budget.delta) - Fraction(delta)), 0.0))

    # -- verification of a persisted ledger's accounting ------------------------------------------
    def _verify(self, rows: list[dict]) -> None:
        """Budget, charges, events and running totals of verified rows (the chain is ledger.py's)."""
        where = "ledger"
        history: list = []
        total, total_delta = Fraction(0), Fraction(0)
        for i, row in enumerate(rows):
            if (row["budget_kind"], row["budget"], row["budget_delta"]) != (self._kind, self._total, self.budget.delta):
                raise LedgerError(f"{where} belongs to a different total budget ({row['budget_kind']}="
                                  f"{row['budget']}, delta={row['budget_delta']}) than this session's "
                                  f"{_budget_str(self.budget)}; refusing to use it")
            for c in ("charge", "charge_delta"):
                if row[c] is None or not math.isfinite(row[c]) or row[c] <= 0:
                    raise LedgerError(f"{where}: row {i} has an invalid {c} {row[c]!r} (must be finite and > 0)")
            try:
                history += accounting.loads(row["events"])
            except ValueError as exc:
                raise LedgerError(f"{where}: row {i} has invalid events: {exc}") from None
            if self._kind == "rho":
                total, total_delta = total + Fraction(row["charge"]), total_delta + Fraction(row["charge_delta"])
                if row["spent"] != _up(total) or row["spent_delta"] != _up(total_delta):
                    raise LedgerError(f"{where}: row {i}'s running total does not equal the sum of the charges")
                if total > Fraction(self._total) or total_delta > Fraction(self.budget.delta):
                    raise LedgerError(f"{where}: row {i}'s running total exceeds the budget")
        # (ε, δ): the stored running totals are chained; the events are re-composed (not compared
        # for equality, which would tie a ledger to one dp_accounting version) and must fit the budget.
        if self._kind == "epsilon" and rows and not accounting.admits(history, self._total, self.budget.delta):
            raise LedgerError(f"{where}: the composed events exceed the budget")


__all__ = ["Amount", "LedgerError", "Session"]
