"""Conversions between δ-approximate ρ-zCDP and (ε, δ)-DP."""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from ..errors import InvalidParameter


def _log_cks_delta(rho: float, epsilon: float, alpha: float) -> float:
    # log of exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α  (Canonne–Kamath–Steinke 2020, NeurIPS Prop. 7 as
    # cited by DP-SIPS Lemma 8; arXiv:2004.00010v4 Prop. 12 with ρ-zCDP's Rényi curve αρ)
    return (alpha - 1) * (alpha * rho - epsilon) - math.log(alpha - 1) + alpha * math.log1p(-1 / alpha)


def zcdp_delta(rho: float, epsilon: float) -> tuple[float, float]:
    """(δ', α*): the δ' at which ρ-zCDP implies (ε, δ')-DP, minimised over α > 1 (CKS Prop. 7)."""
    if rho <= 0 or epsilon <= 0:
        raise InvalidParameter("rho and epsilon must be > 0")
    hi = max(2.0, 10 * (epsilon / rho + 1))
    res = minimize_scalar(lambda a: _log_cks_delta(rho, epsilon, a), bounds=(1 + 1e-9, hi), method="bounded",
                          options={"xatol": 1e-10})
    return min(1.0, math.exp(res.fun)), float(res.x)


def approx_zcdp_to_dp(rho: float, delta: float, epsilon: float) -> float:
    """Total δ of (ε, δ + (1−δ)δ')-DP implied by δ-approximate ρ-zCDP (DP-SIPS Corollary 9)."""
    d_prime, _ = zcdp_delta(rho, epsilon)
    return delta + (1 - delta) * d_prime


def approx_zcdp_epsilon(rho: float, delta: float, delta_dp: float) -> float:
    """Smallest ε with δ-approx ρ-zCDP ⇒ (ε, delta_dp)-DP (DP-SIPS Corollary 9, inverted)."""
    if not (delta < delta_dp < 1):
        raise InvalidParameter(f"target delta {delta_dp!r} must exceed the zCDP delta {delta!r} and be < 1")
    target = (delta_dp - delta) / (1 - delta)

    def gap(eps: float) -> float:
        return math.log(max(zcdp_delta(rho, eps)[0], 5e-324)) - math.log(target)   # δ' may underflow to 0

    if gap(1e-12) <= 0:          # tiny ρ with a generous δ: the target holds already as ε → 0
        return 1e-12
    hi = rho + 2 * math.sqrt(rho * math.log(1 / target)) + 1.0  # Bun–Steinke bound, padded
    while gap(hi) > 0:
        hi *= 2
    eps = brentq(gap, 1e-12, hi, xtol=1e-12)
    while gap(eps) > 0:
        eps = float(np.nextafter(eps, math.inf)) * (1 + 1e-12)
    return eps
