"""Noise scales and release thresholds, each from the theorem that makes it private.

All functions round their result *up* (a larger σ or threshold is always still private), by a
relative margin far above float error but far below anything that changes utility.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr, ndtri

from ..errors import InvalidParameter
from ..validation import max_contributions as check_max_contributions

# Relative safety margin for rounding σ and thresholds up.
_ROUND_UP = 1e-12

# ρ(k): the largest weight a user with k novel keys gives one of them. Non-increasing in k (every
# bound below is), which `max_over_k` relies on to find thresholds without enumerating k.
NoveltyBound = Callable[[np.ndarray], np.ndarray]


def _up(x: float) -> float:
    return float(x) + abs(float(x)) * _ROUND_UP


def weighted_l2_novelty(k: np.ndarray) -> np.ndarray:
    """ρ(k) = 1/√k: a new user with k novel items gives each at most 1/√k (Gopi et al. Thm 5.1)."""
    return 1.0 / np.sqrt(k)


def capped_l2_novelty(cap: float) -> NoveltyBound:
    """ρ(k) = c/√k: a user whose vector has every entry ≤ c/√d (d ≥ k kept keys) gives each of k novel
    keys at most c/√k, which is what the Gopi et al. Thm 5.1 argument needs (c = 1: Weighted
    Gaussian; c = 1/β_min: adaptive SIPS rounds ≥ 2, docs/specs/adaptive-sips.md privacy step 2)."""
    if not (math.isfinite(cap) and cap > 0):
        raise InvalidParameter(f"a novelty cap must be a finite number > 0, got {cap!r}")
    return lambda k: float(cap) / np.sqrt(k)


def weighted_l1_novelty(k: np.ndarray) -> np.ndarray:
    """ρ(k) = 1/k for ℓ1-normalised weights (Gopi et al. journal Thm 4.1 / B.1)."""
    return 1.0 / k


def constant_novelty(value: float) -> NoveltyBound:
    """ρ(k) = value for every k (e.g. count mechanisms: one user adds at most 1 to a count)."""
    return lambda k: np.full(np.shape(k), float(value))


# Pruning slack of `max_over_k`, relative to the magnitudes compared: 100× the ≤ 1e-14 relative
# error of evaluating ρ and the noise term in floats, so no k whose computed value could be the
# maximum is ever pruned.
_PRUNE_SLACK = 1e-12
_SPLIT = 32          # sub-intervals per refinement step


def max_over_k(novelty: NoveltyBound, noise_term: Callable[[np.ndarray], np.ndarray], max_contributions: int) -> float:
    """max_{k = 1..Δ0} ρ(k) + g(k) for a non-increasing novelty bound ρ and a non-decreasing noise term
    g, exactly the float maximum that evaluating every k would give, with O(log Δ0) evaluations.

    Proof. For integers a ≤ k ≤ b, ρ(k) ≤ ρ(a) and g(k) ≤ g(b), so ρ(k) + g(k) ≤ ρ(a) + g(b). The
    search evaluates f = ρ + g at 1, Δ0 and a grid between; each gap (a, b) between evaluated points
    is dropped once ρ(a) + g(b) is below the best evaluated value by more than `_PRUNE_SLACK` (which
    dwarfs float error, so no k in the gap has a computed f(k) reaching the best), and otherwise is
    split into `_SPLIT` parts whose points are evaluated. Gaps without interior integers are done.
    Every integer in [1, Δ0] is thus either evaluated or provably below an evaluated value, and the
    result is max_k f(k) as enumeration computes it (same expression, elementwise). Only gaps whose
    bound comes within the slack of the maximum are split further, so for the smooth ρ and g used
    here a handful of refinements suffice even for Δ0 = 10¹².
    """
    n = check_max_contributions(max_contributions)
    lo, hi = np.array([1], dtype=np.int64), np.array([n], dtype=np.int64)
    best = -math.inf
    while lo.size:
        # edges lo + ⌈(hi − lo)·j/_SPLIT⌉, j = 0.._SPLIT, of each open gap; sub-gaps between neighbours
        edges = lo[:, None] + -((-(hi - lo)[:, None] * np.arange(_SPLIT + 1)) // _SPLIT)
        ks, where = np.unique(edges, return_inverse=True)
        rho, g = novelty(ks.astype(np.float64)), noise_term(ks.astype(np.float64))
        best = max(best, float(np.max(rho + g)))
        where = where.reshape(edges.shape)
        lo, hi = edges[:, :-1].ravel(), edges[:, 1:].ravel()
        bound_rho, bound_g = rho[where[:, :-1].ravel()], g[where[:, 1:].ravel()]
        slack = _PRUNE_SLACK * (np.abs(bound_rho) + np.abs(bound_g) + abs(best))
        open_ = (hi - lo > 1) & (bound_rho + bound_g >= best - slack)
        lo, hi = lo[open_], hi[open_]
    return best


def per_item_tail(delta: float, k: np.ndarray) -> np.ndarray:
    """q_k = 1 − (1 − δ)^{1/k}, computed stably as −expm1(log1p(−δ)/k)."""
    return -np.expm1(np.log1p(-delta) / k)


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """δ achieved by N(0, σ²) at ε for ℓ2 sensitivity Δ (Balle & Wang 2018, Thm 8)."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ with Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ (Balle & Wang 2018, Thm 8)."""
    if not (epsilon > 0 and 0 < delta < 1 and sensitivity > 0):
        raise InvalidParameter("analytic Gaussian needs epsilon > 0, delta in (0, 1), sensitivity > 0")

    def excess(sigma: float) -> float:
        return analytic_gaussian_delta(sigma, epsilon, sensitivity) - delta

    lo, hi = 1e-6 * sensitivity, sensitivity
    while excess(hi) > 0:  # δ(σ) decreases in σ: grow until private
        lo, hi = hi, hi * 2
    if excess(lo) <= 0:
        return _up(lo)
    root = brentq(excess, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    sigma = _up(root)
    while excess(sigma) > 0:  # never return a σ that fails the condition
        sigma = _up(sigma * (1 + 1e-12))
    return sigma


def zcdp_sigma(rho: float, sensitivity: float = 1.0) -> float:
    """σ = Δ/√(2ρ): the Gaussian mechanism is ρ-zCDP (Bun & Steinke 2016, Prop. 1.6)."""
    if not rho > 0:
        raise InvalidParameter("rho must be > 0")
    return _up(sensitivity / math.sqrt(2 * rho))


def laplace_scale(epsilon: float, sensitivity: float = 1.0) -> float:
    """λ = Δ1/ε rounded up: the Laplace mechanism is ε-DP for λ ≥ Δ1/ε (Dwork & Roth 2014, Thm 3.6).

    Float division rounds to nearest, so Δ1/ε can land 1 ulp below the real quotient (ε = 3 gives
    0.33333333333333331 < 1/3); the quotient is compared exactly and stepped up when it is below.
    """
    if not (epsilon > 0 and sensitivity > 0):
        raise InvalidParameter("the Laplace mechanism needs epsilon > 0 and sensitivity > 0")
    scale = sensitivity / epsilon
    if Fraction(scale) * Fraction(epsilon) < Fraction(sensitivity):
        scale = math.nextafter(scale, math.inf)
    return scale


def gaussian_threshold(
    sigma: float, delta: float, max_contributions: int, novelty: NoveltyBound = weighted_l2_novelty
) -> float:
    """T = max_{k≤Δ0} [ρ(k) + σ·Φ⁻¹((1−δ)^{1/k})] (Gopi et al. Thm 5.1; DP-SIPS Alg. 2).

    `delta` is the share of δ spent on novel items (δ/2 for (ε, δ)-DP, δ for approx. zCDP).
    Φ⁻¹((1−δ)^{1/k}) is evaluated as −Φ⁻¹(q_k) with q_k the small upper tail, for stability; it
    increases with k (q_k decreases), so `max_over_k` finds the maximum without enumerating k.
    """
    return _up(max_over_k(novelty, lambda k: -(sigma * ndtri(per_item_tail(delta, k))), max_contributions))


def laplace_threshold(
    scale: float, delta: float, max_contributions: int, novelty: NoveltyBound = weighted_l1_novelty
) -> float:
    """T = max_{t≤Δ0} [ρ(t) + λ·log(1/(2(1−(1−δ)^{1/t})))] (Gopi et al. journal Thm 4.1, B.1, A.1).

    The noise term −λ·log(2q_t) increases with t (q_t decreases), so `max_over_k` applies.
    """
    return _up(max_over_k(novelty, lambda k: -(scale * np.log(2 * per_item_tail(delta, k))), max_contributions))


def gaussian_release_probability(weights: np.ndarray, sigma: float, threshold: float) -> np.ndarray:
    """P(w + N(0, σ²) ≥ T) for each weight: the exact per-item release probability."""
    return ndtr((np.asarray(weights, dtype=float) - threshold) / sigma)


def laplace_release_probability(weights: np.ndarray, scale: float, threshold: float) -> np.ndarray:
    """P(w + Lap(λ) ≥ T) for each weight."""
    z = (np.asarray(weights, dtype=float) - threshold) / scale
    return np.where(z >= 0, 1 - 0.5 * np.exp(-np.abs(z)), 0.5 * np.exp(-np.abs(z)))
