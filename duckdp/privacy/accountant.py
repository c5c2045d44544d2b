"""One accountant for every budget: check an event, commit it, read what is spent and what remains.

Modelled on dp_accounting's `privacy_accountant.py`: `Accountant.for_budget(b)` returns the
accountant of the budget's kind; `check(event)` says whether the event would fit (raises nothing);
`commit(event)` records it, or raises `BudgetExceeded` (an `UnsupportedEventError` for events it
cannot account) without changing any state. Every committed event is one `LedgerEntry` row, in
memory or in a persisted ledger (duckdp/ledger.py: the row is decided inside the ledger's
transaction, from the rows it read).

- (ε, δ) budget, `PldAccountant`: every event is flattened to curve events (privacy/events.py; a
  zCDP step at its DP-SIPS Cor. 9 conversion, δ' = δ) and the whole history is composed tightly
  (privacy/accounting.py: exact Gaussian DP, a pessimistic PLD for mixed curves, plus Σ δ_i). An
  event fits iff the history with it is (ε, δ)-DP at the budget; `spent` is the composed ε at the
  budget's δ and Σ δ_i.
- δ-approximate ρ-zCDP budget, `ZcdpAccountant`: ρ and δ add (Bun & Steinke 2016, Lemma 8.2;
  DP-SIPS Lemma 6), exactly (as binary fractions) and rounded up, so 0.1 + 0.2 does not fit 0.3.
  It accounts zCDP steps and rounds calibrated to a zCDP share; (ε, δ)-DP events are unsupported:
  no conversion from (ε, δ)-DP to approximate zCDP is established in the papers duckdp cites.

A count release's privacy filter (Rogers 2024 Alg. 2; Whitehouse et al. Thm 5) is a zCDP
accountant over its budget: each step runs only if `check` admits it.

`nominal_spent(event)` is a release's own `Spent` (its round shares by basic composition for
(ε, δ), Dwork & Roth 2014 Thm 3.16, or additively for zCDP), the number `Release.spent` reports.
"""
from __future__ import annotations

import datetime
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any, ClassVar, Protocol

from ..errors import BudgetExceeded, InvalidParameter, LedgerError, UnsupportedEventError
from . import accounting
from .budget import ZCDP, Budget, EpsDelta
from .composition import Spent, zcdp_as_dp
from .events import (
    CalibratedEvent,
    ComposedEvent,
    CurveEvent,
    DpEvent,
    GaussianEvent,
    LaplaceEvent,
    LoggedEvent,
    PrivacyEvent,
    ZcdpEvent,
    budget_event,
    dumps,
    loads,
)

Row = dict[str, Any]
REFUSE_EPS = ("this budget is zCDP (rho=); an (ε, δ)-DP release has no sound conversion to approximate zCDP, "
              "so it cannot be charged: pass rho= to a mechanism that takes it, or use an epsilon= budget")


class Ledger(Protocol):
    """Where an accountant keeps its rows (duckdp/ledger.py: MemoryLedger, TableLedger)."""

    def rows(self) -> list[Row]: ...

    def append(self, make_row: Callable[[list[Row]], Row]) -> Row: ...


class _ListLedger:
    """Rows in a plain list (an accountant without a ledger: count release's filter, a user's own budget)."""

    def __init__(self) -> None:
        self._rows: list[Row] = []

    def rows(self) -> list[Row]:
        return self._rows

    def append(self, make_row: Callable[[list[Row]], Row]) -> Row:
        row = make_row(self._rows)
        row |= {"seq": len(self._rows), "chain": None, "released": None, "error": None}
        self._rows.append(row)
        return row


@dataclass(frozen=True)
class LedgerEntry:
    """One committed event: the ledger's row (duckdp/ledger.py COLUMNS), typed."""

    seq: int
    time: datetime.datetime
    algo: str
    request: str
    input: str
    events: str             # JSON of the curve events (privacy/events.py)
    charge: float
    charge_delta: float
    spent: float
    spent_delta: float
    budget_kind: str
    budget: float
    budget_delta: float
    chain: str | None = None
    released: int | None = None
    error: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> LedgerEntry:
        values: dict[str, Any] = {name: row.get(name) for name in _ENTRY_FIELDS}
        return cls(**values)

    def as_row(self) -> Row:
        return {name: getattr(self, name) for name in _ENTRY_FIELDS}


_ENTRY_FIELDS = tuple(f.name for f in fields(LedgerEntry))


@dataclass(frozen=True)
class Amount:
    """An amount of budget in the accountant's units: `kind` is "epsilon" or "rho", plus δ."""

    kind: str
    value: float
    delta: float

    def as_dict(self) -> dict[str, float]:
        return {self.kind: self.value, "delta": self.delta}

    def __str__(self) -> str:
        return f"{'ε' if self.kind == 'epsilon' else 'ρ'}={self.value:.6g}, δ={self.delta:.6g}"


def _up(x: Fraction) -> float:
    """The float nearest above (or equal to) the exact value x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def _down(x: Fraction) -> float:
    f = float(x)
    return f if Fraction(f) <= x else math.nextafter(f, -math.inf)


# Exact sums of floats as integers in units of 2⁻¹⁰⁷⁴ (every finite double is a whole number of them):
# the same exact arithmetic as Fraction, an order of magnitude faster for a filter's many small steps.
_ULP_BITS = 1074
_ONE = 1 << _ULP_BITS


def _fixed(x: float) -> int:
    """x exactly, in units of 2⁻¹⁰⁷⁴."""
    n, d = x.as_integer_ratio()
    return n << (_ULP_BITS - (d.bit_length() - 1))


def _fixed_up(t: int) -> float:
    """The float nearest above (or equal to) t·2⁻¹⁰⁷⁴ (int / int is correctly rounded)."""
    f = t / _ONE
    return f if _fixed(f) >= t else math.nextafter(f, math.inf)


def budget_str(b: Budget) -> str:
    return f"ρ={b.rho:.6g}, δ={b.delta:.6g} (zCDP)" if isinstance(b, ZCDP) else f"ε={b.epsilon:.6g}, δ={b.delta:.6g}"


def flatten(event: PrivacyEvent) -> list[PrivacyEvent]:
    """The leaf events of `event` in order (ComposedEvents opened; a CalibratedEvent is a leaf)."""
    if isinstance(event, ComposedEvent):
        return [leaf for e in event.events for leaf in flatten(e)]
    return [event]


def curves(event: PrivacyEvent) -> list[CurveEvent]:
    """The curve events an (ε, δ) accountant composes: zCDP steps at DP-SIPS Cor. 9 with δ' = δ."""
    out: list[CurveEvent] = []
    for leaf in flatten(event):
        inner = leaf.event if isinstance(leaf, CalibratedEvent) else leaf
        if isinstance(inner, ZcdpEvent):
            epsilon, delta_dp = zcdp_as_dp(inner.rho, inner.delta)
            out.append(DpEvent(epsilon, delta_dp))
        elif isinstance(inner, (GaussianEvent, LaplaceEvent, DpEvent)):
            out.append(inner)
        else:
            raise UnsupportedEventError(f"no (ε, δ) accounting for {inner!r}")
    return out


def _shares(event: PrivacyEvent) -> list[tuple[str, float, float]]:
    """("epsilon" | "rho", amount, δ) of every leaf: its calibrated share, or a generic event's own."""
    out = []
    for leaf in flatten(event):
        if isinstance(leaf, CalibratedEvent):
            b = leaf.share
            out.append(("epsilon", b.epsilon, b.delta) if isinstance(b, EpsDelta) else ("rho", b.rho, b.delta))
        elif isinstance(leaf, ZcdpEvent):
            out.append(("rho", leaf.rho, leaf.delta))
        elif isinstance(leaf, DpEvent):
            out.append(("epsilon", leaf.epsilon, leaf.delta))
        else:
            raise UnsupportedEventError(f"{leaf!r} has no nominal (ε, δ) or ρ charge")
    return out


def spent_of(budgets: Sequence[Budget]) -> Spent:
    """The nominal composition of round budgets (`nominal_spent` of their events)."""
    return nominal_spent(ComposedEvent(tuple(budget_event(b) for b in budgets)))


def nominal_spent(event: PrivacyEvent) -> Spent:
    """A release's own Spent: its shares composed additively for zCDP (Bun–Steinke Lemma 8.2 via DP-SIPS
    Lemma 6, δ's summed as an upper bound) or by basic composition for (ε, δ)-DP (Dwork–Roth Thm 3.16).
    Rounds calibrated jointly (privacy/composition.gaussian_rounds) carry exact shares of their request,
    so their sum is that request."""
    parts = _shares(event)
    if not parts:
        raise InvalidParameter("a release spends at least one round's budget")
    kinds = {k for k, _, _ in parts}
    if kinds == {"rho"}:
        rho = sum(a for _, a, _ in parts)
        delta = min(sum(d for _, _, d in parts), 1.0)
        epsilon, delta_dp = zcdp_as_dp(rho, delta)
        return Spent(epsilon, delta_dp, rho, delta)
    if kinds == {"epsilon"}:
        return Spent(sum(a for _, a, _ in parts), min(sum(d for _, _, d in parts), 1.0))
    raise UnsupportedEventError("cannot compose a mix of zCDP and (ε, δ) rounds")


class Accountant(ABC):
    """Check → commit over a budget; `spent`, `remaining` and `entries` (one LedgerEntry per commit)."""

    kind: ClassVar[str]

    def __init__(self, budget: Budget, ledger: Ledger | None = None) -> None:
        self.budget = budget
        self._ledger: Ledger = ledger if ledger is not None else _ListLedger()
        self.committed: list[LedgerEntry] = []      # entries committed through this object, in order

    @staticmethod
    def for_budget(budget: Budget, ledger: Ledger | None = None) -> Accountant:
        """The accountant of `budget`'s kind, over `ledger` (default: rows in memory)."""
        if isinstance(budget, EpsDelta):
            return PldAccountant(budget, ledger)
        if isinstance(budget, ZCDP):
            return ZcdpAccountant(budget, ledger)
        raise InvalidParameter(f"not a privacy budget: {budget!r}")

    @property
    @abstractmethod
    def total(self) -> float:
        """The budget's ε (or ρ)."""

    # -- public -----------------------------------------------------------------------------------
    def check(self, event: PrivacyEvent) -> bool:
        """Whether committing `event` now would succeed; changes nothing and raises nothing."""
        try:
            return self._fits(self._ledger.rows(), event)
        except InvalidParameter:
            return False

    def commit(self, event: PrivacyEvent, *, label: str = "event", input: str = "") -> LedgerEntry:
        """Record `event`; BudgetExceeded (or UnsupportedEventError) leaves every state unchanged."""
        entry = LedgerEntry.from_row(self._ledger.append(lambda rows: self._row(rows, event, label, input)))
        self.committed.append(entry)
        return entry

    @property
    def entries(self) -> list[LedgerEntry]:
        return [LedgerEntry.from_row(r) for r in self._ledger.rows()]

    @property
    def events(self) -> list[LoggedEvent]:
        """Every committed event as recorded in the ledger, in order."""
        return [e for r in self._ledger.rows() for e in loads(r["events"])]

    @property
    def spent(self) -> Amount:
        """Budget committed so far: ρ and δ (zCDP), or the composed ε at the budget's δ and Σ δ_i."""
        rows = self._ledger.rows()
        return Amount(self.kind, rows[-1]["spent"] if rows else 0.0, rows[-1]["spent_delta"] if rows else 0.0)

    @property
    def remaining(self) -> Amount:
        """What is left: ρ and δ (zCDP), or the ε left at the budget's δ and the δ left for novel keys."""
        return self._remaining_of(self._ledger.rows())

    def verify(self, rows: list[Row]) -> None:
        """LedgerError unless the rows (e.g. read back from a persisted ledger) belong to this budget,
        carry valid charges and events, and fit it."""
        for i, row in enumerate(rows):
            if (row["budget_kind"], row["budget"], row["budget_delta"]) != (self.kind, self.total, self.budget.delta):
                raise LedgerError(f"ledger belongs to a different total budget ({row['budget_kind']}="
                                  f"{row['budget']}, delta={row['budget_delta']}) than this session's "
                                  f"{budget_str(self.budget)}; refusing to use it")
            for c, least in (("charge", "> 0"), ("charge_delta", ">= 0")):   # δ = 0: public-key aggregates
                if row[c] is None or not math.isfinite(row[c]) or row[c] < 0 or (least == "> 0" and row[c] == 0):
                    raise LedgerError(f"ledger: row {i} has an invalid {c} {row[c]!r} (must be finite and {least})")
            try:
                loads(row["events"])
            except ValueError as exc:
                raise LedgerError(f"ledger: row {i} has invalid events: {exc}") from None
        self._verify_totals(rows)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {budget_str(self.budget)}: spent {self.spent}, remaining {self.remaining}>"

    # -- per kind ---------------------------------------------------------------------------------
    @abstractmethod
    def _charge(self, rows: list[Row], event: PrivacyEvent) -> tuple[float, float, str, float, float, bool, str]:
        """(charge, charge δ, request text, spent, spent δ, fits, composed-need text) of `event` after `rows`."""

    def _fits(self, rows: list[Row], event: PrivacyEvent) -> bool:
        """Whether `event` fits after `rows` (UnsupportedEventError if it cannot be accounted)."""
        return self._charge(rows, event)[5]

    @abstractmethod
    def _verify_totals(self, rows: list[Row]) -> None: ...

    @abstractmethod
    def _logged(self, event: PrivacyEvent) -> list[LoggedEvent]:
        """The events a ledger row records for `event`."""

    def _row(self, rows: list[Row], event: PrivacyEvent, label: str, input: str) -> Row:
        """The new ledger row for `event` after `rows`, or BudgetExceeded (nothing recorded)."""
        charge, charge_delta, request, spent, spent_delta, fits, need = self._charge(rows, event)
        if not fits:
            left = self._remaining_of(rows)
            over = Amount(self.kind, max(charge - left.value, 0.0), max(charge_delta - left.delta, 0.0))
            raise BudgetExceeded("\n".join([
                f"{label} would exceed the session budget {budget_str(self.budget)}",
                f"  Requested : {Amount(self.kind, charge, charge_delta)}   [{request}]",
                f"  Remaining : {left}", need or f"  Difference: {over} over"]))
        return {"time": datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None), "algo": label,
                "request": request, "input": input, "events": dumps(self._logged(event)),
                "charge": charge, "charge_delta": charge_delta, "spent": spent, "spent_delta": spent_delta,
                "budget_kind": self.kind, "budget": self.total, "budget_delta": self.budget.delta}

    def _remaining_of(self, rows: list[Row]) -> Amount:
        value, delta = (rows[-1]["spent"], rows[-1]["spent_delta"]) if rows else (0.0, 0.0)
        if not math.isfinite(value):
            return Amount(self.kind, 0.0, 0.0)
        return Amount(self.kind, max(_down(Fraction(self.total) - Fraction(value)), 0.0),
                      max(_down(Fraction(self.budget.delta) - Fraction(delta)), 0.0))


class PldAccountant(Accountant):
    """(ε, δ): the whole history composed tightly (privacy/accounting.py; module docstring)."""

    kind = "epsilon"
    budget: EpsDelta

    @property
    def total(self) -> float:
        return self.budget.epsilon

    def _charge(self, rows: list[Row], event: PrivacyEvent) -> tuple[float, float, str, float, float, bool, str]:
        mine = curves(event)
        try:
            alone = nominal_spent(event)
            charge, charge_delta = alone.epsilon, alone.delta
        except UnsupportedEventError:       # bare curves: the event alone at the budget's δ
            charge, charge_delta = accounting.composed_epsilon(mine, self.budget.delta), self.budget.delta
        request = f"ε={charge:.6g}, δ={charge_delta:.6g} alone ({len(mine)} event(s))"
        history = self._history(rows) + mine
        fits = accounting.admits(history, self.total, self.budget.delta)
        spent = accounting.composed_epsilon(history, self.budget.delta)
        spent_delta = accounting.extra_delta(history)
        need = (f"  Composed  : all {len(rows) + 1} releases need ε={spent:.6g} at δ={self.budget.delta:.6g} "
                f"(novel-key δ {spent_delta:.6g}; exact composition)")
        return charge, charge_delta, request, spent, spent_delta, fits, need

    def _logged(self, event: PrivacyEvent) -> list[LoggedEvent]:
        return list(curves(event))

    def _history(self, rows: list[Row]) -> list[CurveEvent]:
        out = []
        for r in rows:
            for e in loads(r["events"]):
                if isinstance(e, ZcdpEvent):
                    raise LedgerError("ledger: a zCDP step in an (ε, δ) ledger")
                out.append(e)
        return out

    def _verify_totals(self, rows: list[Row]) -> None:
        # the stored running totals are chained; the events are re-composed (not compared for equality,
        # which would tie a ledger to one dp_accounting version) and must fit the budget.
        history = self._history(rows)
        if rows and not accounting.admits(history, self.total, self.budget.delta):
            raise LedgerError("ledger: the composed events exceed the budget")


class ZcdpAccountant(Accountant):
    """δ-approximate ρ-zCDP: exact sums of ρ and δ, rounded up (module docstring)."""

    kind = "rho"
    budget: ZCDP

    def __init__(self, budget: Budget, ledger: Ledger | None = None) -> None:
        super().__init__(budget, ledger)
        self._sums: tuple[int, int, int] = (0, 0, 0)        # cache: rows counted, Σρ, Σδ (exact, _fixed units)
        self._limits = (_fixed(self.budget.rho), _fixed(self.budget.delta))

    @property
    def total(self) -> float:
        return self.budget.rho

    def _totals(self, rows: list[Row]) -> tuple[int, int]:
        """Exact Σ charge and Σ charge δ of `rows` (cached: a filter commits many small steps)."""
        n, rho, delta = self._sums
        if n > len(rows):
            n, rho, delta = 0, 0, 0
        for r in rows[n:]:
            rho += _fixed(r["charge"])
            delta += _fixed(r["charge_delta"])
        self._sums = (len(rows), rho, delta)
        return rho, delta

    def _decide(self, rows: list[Row], event: PrivacyEvent) -> tuple[float, float, int, int]:
        """(charge ρ, charge δ) of `event`, each its parts' exact sum rounded up, and the exact totals with it."""
        parts = _shares(event)
        if any(kind != "rho" for kind, _, _ in parts):
            raise UnsupportedEventError(REFUSE_EPS)
        charge = _fixed_up(sum(_fixed(a) for _, a, _ in parts))
        charge_delta = _fixed_up(sum(_fixed(d) for _, _, d in parts))
        rho, delta = self._totals(rows)
        return charge, charge_delta, rho + _fixed(charge), delta + _fixed(charge_delta)

    def _fits(self, rows: list[Row], event: PrivacyEvent) -> bool:
        _, _, total, total_delta = self._decide(rows, event)
        return total <= self._limits[0] and total_delta <= self._limits[1]

    def _charge(self, rows: list[Row], event: PrivacyEvent) -> tuple[float, float, str, float, float, bool, str]:
        charge, charge_delta, total, total_delta = self._decide(rows, event)
        fits = total <= self._limits[0] and total_delta <= self._limits[1]
        request = f"ρ={charge:.6g}, δ={charge_delta:.6g} (zCDP)"
        return charge, charge_delta, request, _fixed_up(total), _fixed_up(total_delta), fits, ""

    def _logged(self, event: PrivacyEvent) -> list[LoggedEvent]:
        out: list[LoggedEvent] = []
        for leaf in flatten(event):
            inner = leaf.event if isinstance(leaf, CalibratedEvent) else leaf
            if not isinstance(inner, (GaussianEvent, LaplaceEvent, DpEvent, ZcdpEvent)):
                raise UnsupportedEventError(f"no zCDP accounting for {inner!r}")
            out.append(inner)
        return out

    def _verify_totals(self, rows: list[Row]) -> None:
        total, total_delta = Fraction(0), Fraction(0)
        for i, row in enumerate(rows):
            total, total_delta = total + Fraction(row["charge"]), total_delta + Fraction(row["charge_delta"])
            if row["spent"] != _up(total) or row["spent_delta"] != _up(total_delta):
                raise LedgerError(f"ledger: row {i}'s running total does not equal the sum of the charges")
            if total > Fraction(self.total) or total_delta > Fraction(self.budget.delta):
                raise LedgerError(f"ledger: row {i}'s running total exceeds the budget")


def plan_hook(accountant: Accountant | None, label: str,
              event: PrivacyEvent) -> Callable[[object, str], None] | None:
    """The lifecycle's `on_plan(plan, input)` that commits `event` to `accountant` before data is read."""
    if accountant is None:
        return None
    if not isinstance(accountant, Accountant):
        raise InvalidParameter(f"accountant must be a duckdp Accountant, got {type(accountant).__name__}")

    def on_plan(_plan: object, description: str) -> None:
        accountant.commit(event, label=label, input=description)
    return on_plan


__all__ = ["Accountant", "Amount", "LedgerEntry", "PldAccountant", "UnsupportedEventError", "ZcdpAccountant",
           "curves", "nominal_spent", "plan_hook", "spent_of"]
