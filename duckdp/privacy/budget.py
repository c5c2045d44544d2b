"""Privacy budgets: (ε, δ)-DP and δ-approximate ρ-zCDP, validated on construction."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidParameter
from ..validation import real

MIN_DELTA = 1e-12  # placeholder, the uniform branch defines and justifies it


def _check_positive(name: str, value) -> float:
    v = real(name, value)
    if v <= 0:
        raise InvalidParameter(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _check_delta(value) -> float:
    v = real("delta", value)
    if not (0.0 < v < 1.0):
        raise InvalidParameter(f"delta must be in (0, 1), got {value!r}")
    return v


@dataclass(frozen=True)
class EpsDelta:
    """An (ε, δ)-DP budget."""

    epsilon: float
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_positive("epsilon", self.epsilon))
        object.__setattr__(self, "delta", _check_delta(self.delta))

    def scaled(self, fraction: float) -> EpsDelta:
        """The share `fraction` of both ε and δ (used for basic-composition splits)."""
        return EpsDelta(self.epsilon * fraction, self.delta * fraction)

    def as_dict(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta}

    def __str__(self) -> str:
        return f"(ε={self.epsilon:g}, δ={self.delta:g})-DP"


@dataclass(frozen=True)
class ZCDP:
    """A δ-approximate ρ-zCDP budget (Bun & Steinke 2016, Def. 8.1)."""

    rho: float
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "rho", _check_positive("rho", self.rho))
        object.__setattr__(self, "delta", _check_delta(self.delta))

    def scaled(self, fraction: float) -> ZCDP:
        return ZCDP(self.rho * fraction, self.delta * fraction)

    def as_dict(self) -> dict:
        return {"rho": self.rho, "delta": self.delta}

    def __str__(self) -> str:
        return f"{self.delta:g}-approximate {self.rho:g}-zCDP"


Budget = EpsDelta | ZCDP


def _exact_parts(total: float, shares: list[float]) -> list[float]:
    """total·share per part on the grid of total's ulp (earlier parts rounded down, the last takes
    the rest), so every partial sum is exact and the parts' float sum is exactly `total`."""
    unit = math.ulp(total)
    parts = [math.floor(total * s / unit) * unit for s in shares[:-1]]
    parts.append(total - math.fsum(parts))
    if min(parts) <= 0:
        raise InvalidParameter("the budget split leaves a part with no budget")
    return parts


def split_exact(budget: Budget, shares: list[float]) -> list:
    """Budgets with these shares of ε (or ρ) and δ whose sums are exactly `budget`'s, so composing
    them (basic composition, or additive zCDP) spends exactly what was requested, never more. Rounds
    calibrated jointly (privacy/composition.py) carry these shares as their charge in the ledger."""
    amount = budget.epsilon if isinstance(budget, EpsDelta) else budget.rho
    parts = zip(_exact_parts(amount, shares), _exact_parts(budget.delta, shares), strict=True)
    return [type(budget)(a, d) for a, d in parts]


def make_budget(epsilon=None, delta=None, rho=None) -> Budget:
    """Build a budget from exactly one of `epsilon` / `rho`, plus `delta`."""
    if (epsilon is None) == (rho is None):
        raise InvalidParameter("give exactly one of epsilon= (for (ε, δ)-DP) or rho= (for zCDP)")
    if delta is None:
        raise InvalidParameter("delta is required: partition selection cannot be pure DP")
    if epsilon is not None:
        return EpsDelta(epsilon, delta)
    return ZCDP(rho, delta)
