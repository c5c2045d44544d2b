"""Privacy budgets: (ε, δ)-DP and δ-approximate ρ-zCDP, validated on construction; the δ floor."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidParameter
from ..validation import delta as check_delta
from ..validation import positive, real

# The smallest total δ a release, a Session or `explain` accepts (checked in `make_budget`).
MIN_DELTA = 2.0**-32            # = 2²⁰ cells of the sampler's 2⁵²-cell grid ≈ 2.33e-10
"""Why δ has a floor tied to the sampler's resolution.

Noise is drawn by inversion from u = (2m + 1)·2⁻⁵³ with m uniform on 2⁵² cells (duckdp/prf.py).
Couple it with the ideal mechanism's exact noise Z = g(U), U uniform on (0, 1), by m = ⌊2⁵²U⌋.
A key's float decision (w + s·g(u) ≥ T, or any monotone rule of its noisy weight) differs from
the ideal one only if U falls near the decision point: within half a cell (mass 2⁻⁵³), plus the
float rounding of g and of w + s·z there, ≤ f(z)·(|T|/s + |z|) + 1 more half-cells (f the noise
density: ≤ 0.4 Gaussian, ½e^(−|z|) Laplace): under 30 while |T| ≤ 50 noise scales (every plan at
δ = MIN_DELTA, ε ∈ {0.1, 1, 10}, Δ0 ∈ {1, 100, 10⁶} is within 36). So per draw TV ≤ τ = 2⁻⁴⁸.

A key whose weight is equal on neighbours D, D' has the same independent decision law on both, so
it factors out of the privacy loss (round by round, given the released history); only the N draws
on keys whose weight can change count. Swapping those for ideal draws costs TV ≤ N·τ on each side,
so an ideally (ε, δ)-DP mechanism is (ε, δ + (1 + e^ε)·N·2⁻⁴⁸)-DP in floats. δ ≥ MIN_DELTA keeps
that extra term ≤ (1 + e^ε)·N·2⁻¹⁶·δ: ≤ 1.7 % of δ at ε = 1 and N = 300; no δ near the per-draw
error 2⁻⁵² could be claimed at all. The reported δ does not include the term.

N ≤ R·Δ0 (the new user's ≤ Δ0 kept keys in each of R rounds) for basic, the weighted mechanisms,
truncated geometric and DP-SIPS. Adaptive SIPS draws noise for every key in play, kept or not, so
its N counts all of the new user's keys; for MAD, the policy mechanisms and count release, one user
can change weights or counts of keys others hold, so N is bounded only by the keys present (count
release compares counts relative to the largest, so its rounding does not grow with the counts:
mechanisms/count_release, beside Alg. 1): there the floor is a conservative guard, not a proof.
δ-parts below the floor (a round's δ_j, count release's δ*) are allowed: they only raise thresholds,
and a threshold beyond the grid's largest draw (8.21σ; Laplace 36.04λ; Gumbel 36.74β) makes a novel
key's release rarer than δ_j, not likelier.
"""


@dataclass(frozen=True)
class EpsDelta:
    """An (ε, δ)-DP budget."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", positive("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))

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

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", positive("rho", self.rho))
        object.__setattr__(self, "delta", check_delta(self.delta))

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


def make_budget(epsilon: Any = None, delta: Any = None, rho: Any = None) -> Budget:
    """Build a budget from exactly one of `epsilon` / `rho`, plus `delta` ≥ MIN_DELTA (every entry point's
    check, before any data is read)."""
    if (epsilon is None) == (rho is None):
        raise InvalidParameter("give exactly one of epsilon= (for (ε, δ)-DP) or rho= (for zCDP)")
    if delta is None:
        raise InvalidParameter("delta is required: partition selection cannot be pure DP")
    if 0 < real("delta", delta) < MIN_DELTA:
        raise InvalidParameter(f"delta={delta!r} is below the floor MIN_DELTA = 2⁻³² ≈ {MIN_DELTA:.3g}: the "
                               "noise sampler's 2⁻⁵²-resolution grid cannot support a smaller δ "
                               "(duckdp/privacy/budget.py, MIN_DELTA)")
    if epsilon is not None:
        return EpsDelta(epsilon, delta)
    return ZCDP(rho, delta)
