"""What a mechanism guarantees about one round in terms of users, for `duckdp.explain`.

Under the Basic weighting a user who holds k ≤ Δ0 keys keeps all of them and adds k^(−e) to each
(e = ½ weighted ℓ2, 1 weighted ℓ1, 0 counts; Gopi et al. ICML 2020 §1.1), so a key held by N
such users has weight ≥ N·k^(−e) and, since P(w + noise ≥ T) grows with w, is released with
probability ≥ P(N·k^(−e) + noise ≥ T). Each mechanism states how its rounds relate to that bound
(`Mechanism.explain_round` / `explain_overall`); explain.py only tabulates.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..privacy.calibration import (
    gaussian_release_probability,
    laplace_release_probability,
)

if TYPE_CHECKING:
    from .base import RoundPlan

Probability = Callable    # (n_users ndarray, keys_per_user int) -> release probability ndarray


@dataclass
class RoundGuarantee:
    """`kind`: "bound" (a guarantee), "reference" (for orientation only) or "none" (no translation)."""

    kind: str
    weighting: str
    probability: Probability | None = None
    notes: list[str] = field(default_factory=list)


def weighting_text(exponent: float) -> str:
    return {0.5: "each user adds 1/√k to each of their k kept keys",
            1.0: "each user adds 1/k to each of their k kept keys",
            0.0: "each user adds 1 to each kept key (counts)"}.get(exponent, f"each user adds k^(−{exponent:g})")


def noise_probability(noise: str, scale: float, threshold: float, exponent: float) -> Probability | None:
    """P(N·k^(−e) + noise ≥ T) as a function of (N, k), or None for noise without a closed form here."""
    release = {"gaussian": gaussian_release_probability, "laplace": laplace_release_probability}.get(noise)
    if release is None:
        return None
    return lambda n, k: release(n * float(k) ** -exponent, scale, threshold)


def basic_bound(plan: RoundPlan, exponent: float) -> RoundGuarantee:
    """The Basic round bound itself (equality when every holder has exactly k keys)."""
    return RoundGuarantee("bound", weighting_text(exponent),
                          noise_probability(plan.noise, plan.scale, plan.threshold, exponent))
