"""Session: one total privacy budget spent over many releases, with a ledger that can be persisted.

Accounting. A zCDP session (rho=, delta=) composes releases additively, Σρ and Σδ (Bun & Steinke
2016, Lemma 8.2; DP-SIPS Lemma 6, whose δ + δ' − δδ' the sum bounds). An (ε, δ) session composes by
basic composition, Σε and Σδ, which holds for adaptively chosen releases (Dwork & Roth 2014,
Thm 3.16 and App. B). An (ε, δ) session also accepts zCDP releases, charged at the (ε, δ)-DP they
imply: δ-approximate ρ-zCDP ⇒ (ε, 2δ − δ²)-DP with ε from DP-SIPS Corollary 9 (what `Release.spent`
states). A zCDP session refuses (ε, δ) releases: no conversion from (ε, δ)-DP to δ-approximate zCDP
is established in the papers duckdp cites (DP-SIPS §5.2.2 converts only the other way), so there is
no justified charge; every Gaussian mechanism takes rho= instead.

Order of events in a call: the release's budget is checked against what remains once its plan is
known and its input resolved, before any data is read (BudgetExceeded); it is recorded in the ledger
immediately after that check, so a call that then fails or is interrupted is still charged (no
refunds once data may have been touched).

Persistence (`ledger_table=`): the ledger lives in a DuckDB table, created if missing. On open and
before every charge the table is re-read and verified — exact columns, consecutive sequence numbers,
the same total budget on every row, positive finite charges, running totals equal to the exact sum
of the charges, within the budget, and a SHA-256 chain over each row's accounting fields — and
refused with LedgerError if anything disagrees.
Amounts are added exactly as the decimals they print as, so charges of 0.1 and 0.2 exhaust a budget of
0.3 (binary addition would exceed it by 4e-17); the two differ by less than 1e-16 relative. The chain exposes edits that do not recompute it; it
cannot stop someone with write access from dropping the table, so protect the database file. A
Session is not thread-safe: run one release at a time per ledger.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
from dataclasses import dataclass
from fractions import Fraction

import duckdb
import pyarrow as pa

from . import mechanisms
from .api import select as _select
from .count_release import CountRelease
from .count_release import count_release as _count_release
from .errors import BudgetExceeded, DataError, InvalidParameter
from .privacy.budget import ZCDP, Budget, EpsDelta, make_budget
from .release import Release, Spent
from .spark import is_spark_session
from .templates import quote_ident


class LedgerError(DataError):
    """A persisted ledger is inconsistent, tampered with, or belongs to a different budget."""


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


# name, DuckDB type; `chain` covers every column before it, `released`/`error` are the outcome
COLUMNS = (("seq", "BIGINT"), ("time", "TIMESTAMP"), ("algo", "VARCHAR"), ("request", "VARCHAR"),
           ("input", "VARCHAR"), ("charge", "DOUBLE"), ("charge_delta", "DOUBLE"), ("spent", "DOUBLE"),
           ("spent_delta", "DOUBLE"), ("budget_kind", "VARCHAR"), ("budget", "DOUBLE"),
           ("budget_delta", "DOUBLE"), ("chain", "VARCHAR"), ("released", "BIGINT"), ("error", "VARCHAR"))
_NAMES = [c for c, _ in COLUMNS]
_CHAINED = _NAMES[:_NAMES.index("chain")]
_SCHEMA = pa.schema([(c, {"BIGINT": pa.int64(), "TIMESTAMP": pa.timestamp("us"), "VARCHAR": pa.string(),
                          "DOUBLE": pa.float64()}[t]) for c, t in COLUMNS])


def _chain(previous: str, row: dict) -> str:
    """SHA-256 of the previous row's chain value and this row's accounting fields (floats by repr)."""
    fields = [row[c].isoformat() if c == "time" else repr(row[c]) if isinstance(row[c], float) else row[c]
              for c in _CHAINED]
    return hashlib.sha256(json.dumps([previous] + fields, ensure_ascii=True).encode()).hexdigest()


def _decimal(x: float) -> Fraction:
    """A float as the decimal it prints as (shortest repr), exactly."""
    return Fraction(repr(float(x)))


def _decimal_sum(values: list[float]) -> Fraction:
    return sum(map(_decimal, values), Fraction(0))


def _budget_str(b: Budget) -> str:
    return f"ρ={b.rho:.6g}, δ={b.delta:.6g} (zCDP)" if isinstance(b, ZCDP) else f"ε={b.epsilon:.6g}, δ={b.delta:.6g}"


class Session:
    """A total budget for many releases on one connection: `select`, `count_release`, `ledger`.

    `Session(con, epsilon=1, delta=1e-6)` or `Session(con, rho=0.5, delta=1e-6)`. With
    `ledger_table="name"` (or a (schema, table) / (database, schema, table) tuple) the ledger is
    kept in that DuckDB table so the budget survives restarts; reopening with a different total
    budget, or a ledger that fails verification, raises LedgerError. `con` may be a SparkSession
    (releases run on Spark); its ledger lives in memory (`ledger_table` needs DuckDB).
    """

    def __init__(self, con, *, epsilon: float | None = None, delta: float | None = None,
                 rho: float | None = None, ledger_table: str | tuple | list | None = None):
        if not (isinstance(con, duckdb.DuckDBPyConnection) or is_spark_session(con)):
            raise InvalidParameter(f"con must be a duckdb connection or a SparkSession, got {type(con).__name__}")
        if ledger_table is not None and is_spark_session(con):
            raise InvalidParameter("ledger_table keeps the ledger in a DuckDB table; with a SparkSession the "
                                   "ledger is in memory (persist `session.ledger` yourself)")
        self._con = con
        self.budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
        self._kind = "epsilon" if isinstance(self.budget, EpsDelta) else "rho"
        self._total = self.budget.epsilon if self._kind == "epsilon" else self.budget.rho
        self._rows: list[dict] = []
        self._table = None if ledger_table is None else self._table_ref(ledger_table)
        if self._table is not None:
            self._open_table()
            self._current()                     # verify on open

    # -- public -----------------------------------------------------------------------------------
    @property
    def spent(self) -> Amount:
        """Budget charged so far (every recorded release, including failed ones)."""
        rows = self._current()
        return Amount(self._kind, rows[-1]["spent"] if rows else 0.0, rows[-1]["spent_delta"] if rows else 0.0)

    @property
    def remaining(self) -> Amount:
        spent = self.spent
        return Amount(self._kind, max(self._total - spent.value, 0.0), max(self.budget.delta - spent.delta, 0.0))

    @property
    def ledger(self) -> pa.Table:
        """One row per charged release: time (UTC), algo, request, input, charge, running totals,
        released key count (NULL if the call failed, with `error` saying why)."""
        return pa.Table.from_pylist(self._current(), schema=_SCHEMA)

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

    def _charge_of(self, budgets: list[Budget]) -> tuple[float, float, str]:
        """(amount, δ, request text) of a release in the session's units."""
        spent = Spent.of(budgets)
        if spent.rho is not None:
            request = f"ρ={spent.rho:.6g}, δ={spent.zcdp_delta:.6g} (zCDP)"
            if self._kind == "rho":
                return spent.rho, spent.zcdp_delta, request
            return spent.epsilon, spent.delta, request + f" → ε={spent.epsilon:.6g}, δ={spent.delta:.6g} (DP-SIPS Cor. 9)"
        if self._kind == "rho":
            raise InvalidParameter(self._refuse_eps())
        return spent.epsilon, spent.delta, f"ε={spent.epsilon:.6g}, δ={spent.delta:.6g}"

    def _run(self, call, algo_name):
        charged: list[dict] = []

        def hook(budgets, description):
            charged.append(self._charge(algo_name(), budgets, description))

        try:
            release = call(hook)
        except BaseException as exc:
            if charged:
                self._finish(charged[0], None, f"{type(exc).__name__}: {exc}"[:500])
            raise
        self._finish(charged[0], len(release), None)
        return release

    def _charge(self, algo: str, budgets: list[Budget], description: str) -> dict:
        """Check the release against what remains, then record it (before any data is read)."""
        amount, delta, request = self._charge_of(budgets)
        rows = self._current()
        new_total = _decimal_sum([r["charge"] for r in rows] + [amount])
        new_delta = _decimal_sum([r["charge_delta"] for r in rows] + [delta])
        if new_total > _decimal(self._total) or new_delta > _decimal(self.budget.delta):
            left = self.remaining
            over = Amount(self._kind, max(amount - left.value, 0.0), max(delta - left.delta, 0.0))
            raise BudgetExceeded(
                f"{algo} would exceed the session budget {_budget_str(self.budget)}\n"
                f"  Requested : {Amount(self._kind, amount, delta)}   [{request}]\n"
                f"  Remaining : {left}\n"
                f"  Difference: {over} over")
        row = {"seq": len(rows), "time": datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None),
               "algo": algo, "request": request, "input": description, "charge": amount, "charge_delta": delta,
               "spent": float(new_total), "spent_delta": float(new_delta), "budget_kind": self._kind, "budget": self._total,
               "budget_delta": self.budget.delta}
        row |= {"chain": _chain(rows[-1]["chain"] if rows else "", row), "released": None, "error": None}
        if self._table:
            self._con.execute(f"INSERT INTO {self._table} VALUES ({', '.join('$' + c for c in _NAMES)})", row)
        else:
            self._rows.append(row)
        return row

    def _finish(self, entry: dict, released: int | None, error: str | None) -> None:
        """Record a charged call's outcome (never its charge, which is already final)."""
        if self._table:
            self._con.execute(f"UPDATE {self._table} SET released = $released, error = $error WHERE seq = $seq",
                              {"released": released, "error": error, "seq": entry["seq"]})
        else:
            entry.update(released=released, error=error)

    # -- persisted ledger -------------------------------------------------------------------------
    def _current(self) -> list[dict]:
        """The ledger rows: re-read and verified from the table, or the in-memory list."""
        return self._read() if self._table else self._rows

    @staticmethod
    def _table_ref(name) -> str:
        parts = [name] if isinstance(name, str) else list(name) if isinstance(name, (tuple, list)) else None
        if not parts or len(parts) > 3 or not all(isinstance(p, str) and p and "\x00" not in p for p in parts):
            raise InvalidParameter("ledger_table must be a table name or a (schema, table) / "
                                   f"(database, schema, table) tuple of names, got {name!r}")
        return ".".join(quote_ident(p) for p in parts)

    def _open_table(self) -> None:
        columns = ", ".join(f"{quote_ident(c)} {t}" for c, t in COLUMNS)
        try:
            self._con.execute(f"CREATE TABLE IF NOT EXISTS {self._table} ({columns})")
        except duckdb.Error as exc:
            raise LedgerError(f"cannot open ledger table {self._table} for writing: {exc}") from None

    def _read(self) -> list[dict]:
        """The persisted ledger's rows, verified (see the module docstring)."""
        head = self._con.sql(f"SELECT * FROM {self._table} LIMIT 0")
        found = list(zip(head.columns, map(str, head.types)))
        if found != list(COLUMNS):
            raise LedgerError(f"{self._table} is not a duckdp ledger: columns {found} differ from {list(COLUMNS)}")
        rows = self._con.sql(f"SELECT * FROM {self._table} ORDER BY seq").to_arrow_table().to_pylist()
        where = f"ledger {self._table}"
        previous, charges, deltas = "", [], []
        for i, row in enumerate(rows):
            if row["seq"] != i:
                raise LedgerError(f"{where}: sequence numbers are not 0..{len(rows) - 1} (row {i} has {row['seq']})")
            if (row["budget_kind"], row["budget"], row["budget_delta"]) != (self._kind, self._total, self.budget.delta):
                raise LedgerError(f"{where} belongs to a different total budget ({row['budget_kind']}="
                                  f"{row['budget']}, delta={row['budget_delta']}) than this session's "
                                  f"{_budget_str(self.budget)}; refusing to use it")
            for c in ("charge", "charge_delta"):
                if row[c] is None or not math.isfinite(row[c]) or row[c] <= 0:
                    raise LedgerError(f"{where}: row {i} has an invalid {c} {row[c]!r} (must be finite and > 0)")
            charges.append(row["charge"])
            deltas.append(row["charge_delta"])
            total, total_delta = _decimal_sum(charges), _decimal_sum(deltas)
            if row["spent"] != float(total) or row["spent_delta"] != float(total_delta):
                raise LedgerError(f"{where}: row {i}'s running total does not equal the sum of the charges")
            if total > _decimal(self._total) or total_delta > _decimal(self.budget.delta):
                raise LedgerError(f"{where}: row {i}'s running total exceeds the budget")
            if row["released"] is not None and row["released"] < 0:
                raise LedgerError(f"{where}: row {i} has a negative released count")
            if any(row[c] is None for c in _CHAINED) or row["chain"] != _chain(previous, row):
                raise LedgerError(f"{where}: row {i} was altered (its chain hash does not match)")
            previous = row["chain"]
        return rows


__all__ = ["Amount", "LedgerError", "Session"]
