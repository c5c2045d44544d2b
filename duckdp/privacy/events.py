"""Privacy events: frozen descriptions of what a release (or one step of it) spends.

Modelled on dp_accounting's `dp_event.py`: an event says which mechanism ran with which parameters,
never how it is accounted; an accountant (privacy/accountant.py) decides that, and refuses events
it cannot account. A new meaning gets a new class.

- `GaussianEvent(mu, novel_delta)`: a Gaussian round with μ = sensitivity/σ (ℓ2) is μ-GDP on the
  keys it can release (Dong, Roth & Su 2022, Thm 2.7); its threshold adds `novel_delta` for novel
  keys (Gopi et al. 2020, Thm 5.1; DP-SIPS Thm 13).
- `LaplaceEvent(epsilon, novel_delta)`: a Laplace round, ε = sensitivity/λ (ℓ1), plus its threshold
  δ (Gopi et al. Thm 4.1 / B.1).
- `DpEvent(epsilon, delta)`: any other (ε, δ)-DP step (truncated geometric, a generic round).
- `ZcdpEvent(rho, delta)`: a δ-approximate ρ-zCDP step (a count release's filter guarantee, Rogers
  2024 Thm 6, and each of its Gumbel calls and counts).
- `CalibratedEvent(event, share)`: a round whose noise was calibrated to `share` of a request; its
  privacy is `event` (what tight composition uses) and `share` is its nominal charge (what basic or
  additive composition, `Release.spent` and zCDP accounting use).
- `ComposedEvent(events)`: events run one after another (adaptively).

The JSON of the ledger's `events` column (one list per release) reads every ledger written before:
{"type": "gaussian", "mu", "delta"}, {"type": "laplace", "epsilon", "delta"}, {"type": "dp",
"epsilon", "delta"} (the curve events an (ε, δ) accountant composes), plus {"type": "zcdp", "rho",
"delta"}, what a zCDP accountant records for a zCDP step (earlier versions wrote its Cor. 9 "dp" form).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..errors import InvalidParameter
from .budget import Budget, EpsDelta


def _check(name: str, value: float, *, delta: bool = False) -> None:
    """A finite float > 0 (a δ: a float in [0, 1)); InvalidParameter (a ValueError) otherwise."""
    ok = isinstance(value, float) and math.isfinite(value) and (0 <= value < 1 if delta else value > 0)
    if not ok:
        raise InvalidParameter(f"invalid privacy event parameter {name}={value!r}")


class PrivacyEvent:
    """Base class of every privacy event (frozen dataclasses below)."""


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """A Gaussian round: μ-GDP (μ = sensitivity/σ) plus `novel_delta` for its threshold's novel keys."""

    mu: float
    novel_delta: float

    def __post_init__(self) -> None:
        _check("mu", self.mu)
        _check("novel_delta", self.novel_delta, delta=True)


@dataclass(frozen=True)
class LaplaceEvent(PrivacyEvent):
    """A Laplace round: ε = sensitivity/λ, plus `novel_delta` for its threshold's novel keys."""

    epsilon: float
    novel_delta: float

    def __post_init__(self) -> None:
        _check("epsilon", self.epsilon)
        _check("novel_delta", self.novel_delta, delta=True)


@dataclass(frozen=True)
class DpEvent(PrivacyEvent):
    """A generic (ε, δ)-DP step."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        _check("epsilon", self.epsilon)
        _check("delta", self.delta, delta=True)


@dataclass(frozen=True)
class ZcdpEvent(PrivacyEvent):
    """A δ-approximate ρ-zCDP step (Bun & Steinke 2016, Def. 8.1)."""

    rho: float
    delta: float

    def __post_init__(self) -> None:
        _check("rho", self.rho)
        _check("delta", self.delta, delta=True)


@dataclass(frozen=True)
class CalibratedEvent(PrivacyEvent):
    """A round calibrated to `share` of a request: privacy `event`, nominal charge `share`."""

    event: GaussianEvent | LaplaceEvent | DpEvent | ZcdpEvent
    share: Budget


@dataclass(frozen=True)
class ComposedEvent(PrivacyEvent):
    """`events` run one after another, each possibly chosen after seeing the previous outputs."""

    events: tuple[PrivacyEvent, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))


CurveEvent = GaussianEvent | LaplaceEvent | DpEvent
LoggedEvent = GaussianEvent | LaplaceEvent | DpEvent | ZcdpEvent     # what a ledger row's `events` lists


def curve_delta(event: CurveEvent) -> float:
    """The additive δ of a curve event (its novel-key δ, or a generic event's δ)."""
    return event.delta if isinstance(event, DpEvent) else event.novel_delta


def to_dict(event: LoggedEvent) -> dict[str, Any]:
    """An event as one item of the ledger's `events` JSON."""
    if isinstance(event, ZcdpEvent):
        return {"type": "zcdp", "rho": event.rho, "delta": event.delta}
    if isinstance(event, GaussianEvent):
        return {"type": "gaussian", "mu": event.mu, "delta": event.novel_delta}
    if isinstance(event, LaplaceEvent):
        return {"type": "laplace", "epsilon": event.epsilon, "delta": event.novel_delta}
    return {"type": "dp", "epsilon": event.epsilon, "delta": event.delta}


_LOGGED: dict[str, tuple[type[LoggedEvent], str]] = {
    "gaussian": (GaussianEvent, "mu"), "laplace": (LaplaceEvent, "epsilon"), "dp": (DpEvent, "epsilon"),
    "zcdp": (ZcdpEvent, "rho")}


def from_dict(d: dict[str, Any]) -> LoggedEvent:
    """An event from its ledger JSON item; ValueError (InvalidParameter) if malformed."""
    kind = str(d.get("type"))
    if kind not in _LOGGED:
        raise InvalidParameter(f"invalid privacy event {d!r}")
    cls, key = _LOGGED[kind]
    if set(d) != {"type", key, "delta"} or not all(type(d[k]) in (int, float) for k in (key, "delta")):
        raise InvalidParameter(f"invalid privacy event {d!r}")
    return cls(float(d[key]), float(d["delta"]))


def dumps(events: Iterable[LoggedEvent]) -> str:
    return json.dumps([to_dict(e) for e in events], separators=(",", ":"))


def loads(text: str) -> list[LoggedEvent]:
    """Curve events from their JSON; ValueError if the text is not a non-empty list of valid events."""
    items = json.loads(text)
    if not isinstance(items, list) or not items:
        raise InvalidParameter("events must be a non-empty JSON list")
    if not all(isinstance(d, dict) for d in items):
        raise InvalidParameter("every event must be a JSON object")
    return [from_dict(d) for d in items]



def _ratio_up(a: float, b: float) -> float:
    """a/b rounded up to a float (exact when the quotient is representable)."""
    q = a / b
    return q if Fraction(q) >= Fraction(a) / Fraction(b) else math.nextafter(q, math.inf)


def budget_event(budget: Budget) -> DpEvent | ZcdpEvent:
    """A whole budget as an event: (ε, δ)-DP or δ-approximate ρ-zCDP."""
    if isinstance(budget, EpsDelta):
        return DpEvent(budget.epsilon, budget.delta)
    return ZcdpEvent(budget.rho, budget.delta)


def round_event(budget: Budget, noise: str, scale: float, sensitivity: float,
                novel_delta: float | None) -> CalibratedEvent:
    """The event of a round with this budget share and noise: Gaussian μ = sensitivity/σ or Laplace
    ε = sensitivity/λ (rounded up) with the threshold's novel-key δ (None: the share's whole δ, the
    safe bound); any other noise as its whole budget share."""
    novel = budget.delta if novel_delta is None else float(novel_delta)
    if noise == "gaussian":
        return CalibratedEvent(GaussianEvent(_ratio_up(sensitivity, scale), novel), budget)
    if noise == "laplace":
        return CalibratedEvent(LaplaceEvent(_ratio_up(sensitivity, scale), novel), budget)
    return CalibratedEvent(budget_event(budget), budget)


__all__ = ["CalibratedEvent", "ComposedEvent", "CurveEvent", "DpEvent", "GaussianEvent", "LaplaceEvent",
           "LoggedEvent", "PrivacyEvent", "ZcdpEvent", "budget_event", "curve_delta", "dumps", "from_dict", "loads",
           "round_event", "to_dict"]
