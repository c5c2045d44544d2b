"""Session: one total privacy budget spent over many releases, with a ledger that can be persisted.

Accounting (privacy/accountant.py: the session's Accountant, which `select` and `count_release`
commit to). Every release is recorded as privacy events of its rounds:
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

import os
from collections.abc import Callable, Sized
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from . import validation
from .api import select as _select
from .count_release import CountRelease
from .count_release import count_release as _count_release
from .errors import InvalidParameter, UnsupportedEventError
from .group_by import Aggregate
from .group_by import aggregate as _aggregate
from .ledger import COLUMNS, LedgerError, MemoryLedger, TableLedger, table_parts
from .privacy.accountant import REFUSE_EPS, Accountant, Amount, budget_str
from .privacy.budget import EpsDelta, make_budget
from .privacy.events import LoggedEvent
from .release import Release
from .spark import is_spark_session

_SCHEMA = pa.schema([(c, {"BIGINT": pa.int64(), "TIMESTAMP": pa.timestamp("us"), "VARCHAR": pa.string(),
                          "DOUBLE": pa.float64()}[t]) for c, t in COLUMNS])
R = TypeVar("R", bound=Sized)


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

    def __init__(self, con: Any, *, epsilon: float | None = None, delta: float | None = None,
                 rho: float | None = None, ledger_table: str | tuple | list | None = None,
                 key: bytes | None = None, anchor: str | os.PathLike | bool | None = None, adopt: bool = False) -> None:
        if not (isinstance(con, duckdb.DuckDBPyConnection) or is_spark_session(con)):
            raise InvalidParameter(f"con must be a duckdb connection or a SparkSession, got {type(con).__name__}")
        if ledger_table is not None and is_spark_session(con):
            raise InvalidParameter("ledger_table keeps the ledger in a DuckDB table; with a SparkSession the "
                                   "ledger is in memory (persist `session.ledger` yourself)")
        self._con = con
        self.budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
        key, anchor, adopt = validation.ledger_key(key), validation.anchor(anchor), validation.flag("adopt", adopt)
        if ledger_table is None:
            if anchor is not None or adopt:
                raise InvalidParameter("anchor= and adopt= need ledger_table= (an in-memory ledger has no guard)")
            self._ledger: MemoryLedger | TableLedger = MemoryLedger(key)
        else:
            table_parts(ledger_table)
            verify = Accountant.for_budget(self.budget).verify     # the budget's check of read-back rows
            self._ledger = TableLedger(con, ledger_table, check=verify, key=key, anchor=anchor, adopt=adopt)
        self.accountant = Accountant.for_budget(self.budget, self._ledger)

    # -- public -----------------------------------------------------------------------------------
    @property
    def spent(self) -> Amount:
        """Budget charged so far (every recorded release, including failed ones): for an (ε, δ)
        session the composed ε at the session's δ, and the novel-key δ's."""
        return self.accountant.spent

    @property
    def remaining(self) -> Amount:
        """What is left: ρ and δ (zCDP), or the ε left at the session's δ and the δ left for novel keys."""
        return self.accountant.remaining

    @property
    def events(self) -> list[LoggedEvent]:
        """Every charged privacy event, in order (privacy/events.py)."""
        return self.accountant.events

    @property
    def ledger(self) -> pa.Table:
        """One row per charged release: time (UTC), algo, request, input, events (JSON), charge,
        running totals, released key count (NULL if the call failed, with `error` saying why)."""
        return pa.Table.from_pylist(self._ledger.rows(), schema=_SCHEMA)

    def select(self, table: Any, *, algo: str, epsilon: float | None = None, delta: float | None = None,
               rho: float | None = None, **kwargs: Any) -> Release:
        """`duckdp.select` on the session's connection, charged to the session's budget."""
        if not isinstance(self.budget, EpsDelta) and epsilon is not None:
            raise UnsupportedEventError(REFUSE_EPS)
        return self._run(lambda: _select(self._con, table, algo=algo, epsilon=epsilon, delta=delta, rho=rho,
                                         accountant=self.accountant, **kwargs))

    def count_release(self, table: Any, *, rho: float, delta: float, **kwargs: Any) -> CountRelease:
        """`duckdp.count_release` on the session's connection, charged to the session's budget."""
        return self._run(lambda: _count_release(self._con, table, rho=rho, delta=delta, accountant=self.accountant,
                                                **kwargs))

    def aggregate(self, table: Any, *, epsilon: float | None = None, delta: float | None = None,
                  rho: float | None = None, **kwargs: Any) -> Aggregate:
        """`duckdp.aggregate` on the session's connection: the whole call charged once, before any data is read."""
        if not isinstance(self.budget, EpsDelta) and epsilon is not None:
            raise UnsupportedEventError(REFUSE_EPS)
        return self._run(lambda: _aggregate(self._con, table, epsilon=epsilon, delta=delta, rho=rho,
                                            accountant=self.accountant, **kwargs))

    def __repr__(self) -> str:
        return f"<Session {budget_str(self.budget)}: spent {self.spent}, remaining {self.remaining}>"

    def _run(self, call: Callable[[], R]) -> R:
        """Run a release that commits to the session's accountant; record its outcome in the ledger row."""
        before = len(self.accountant.committed)
        try:
            release = call()
        except BaseException as exc:
            if len(self.accountant.committed) > before:
                self._ledger.finish(self.accountant.committed[before].seq, None, f"{type(exc).__name__}: {exc}"[:500])
            raise
        self._ledger.finish(self.accountant.committed[before].seq, len(release), None)
        return release


__all__ = ["Amount", "LedgerError", "Session"]
