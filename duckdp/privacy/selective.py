"""Confidence intervals for keys="threshold"'s noisy counts that hold *given* the key was released (spec §5).

A key's count c ≥ 1 is released as y = c + Z only when y ≥ T (Z ~ N_Z(0, σ²)), so on released keys y is biased
upward and y ± h (the noise's interval) covers c less often than asked — near T, far less: a key with c = T − 3
passes only with a large Z. Conditioning on the release is the remedy of selective inference: the released y
has the law of c + Z given c + Z ≥ T, a family with monotone likelihood ratio in c (the discrete Gaussian is an
exponential family in y with natural parameter c/σ², and truncation to y ≥ T keeps that), so inverting the
equal-tailed test of level α = 1 − coverage,

    C(y) = {c ≥ 1 : P_c[Y ≥ y | Y ≥ T] ≥ α/2 and P_c[Y ≤ y | Y ≥ T] ≥ α/2},

gives an interval [c_lo, c_hi] (the first condition holds from some c on, the second up to some c) with
P[c ∈ C(Y) | Y ≥ T] ≥ 1 − α for every c: each tail is rejected with conditional probability ≤ α/2 (a discrete
law's tail at its own α/2 quantile). Post-processing of y, T and σ only (Dwork & Roth Prop. 2.1).

C(y) can be empty: where σ² ≫ T/α, a y just above T is unlikely under every c ≥ 1 (given release, c + Z exceeds
T by ~σ²/(T − c) on average), so no c passes the second test. Any superset of a confidence set is one, and [1, y]
is reported there — "at most the released count", which the upward bias of a released count suggests.

Far above the threshold the condition changes nothing representable: for c ≥ T + 40σ, P[Y < T] < e^{−800}, so
keys with y − h ≥ T + 40σ get y ± h, where h (privacy/aggregate.py `half_width`) is exactly the unconditional
inversion's half-width. The others are searched over c ∈ [1, y + h] (conditioning only lowers the upper end and
the lower end's bound), with tails from L(a) = log Σ_{z ≥ a} exp(−z²/(2σ²)) — log-sums, so P[Y ≥ T] far below
the smallest double is no obstacle; the normaliser cancels in every ratio.
"""
from __future__ import annotations

import math

import numpy as np

FAR = 40.0                  # σ's above T + h from where the condition is ignored (P[not released] < e^-800)


def selected_count_interval(y: np.ndarray, threshold: int, sigma: float, coverage: float,
                            half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per released key (noisy count y ≥ threshold), the counts c ≥ 1 the conditional test keeps: [c_lo, c_hi]
    at `coverage` given release (the module's C(y)); `half_width` is the unconditional interval's at that
    coverage, used where the condition is negligible."""
    y = np.asarray(y, dtype=np.int64)
    lo, hi = y - half_width, y + half_width
    near = y < threshold + FAR * sigma + half_width
    if not near.any():
        return lo, hi
    yn = y[near]
    alpha2 = (1.0 - coverage) / 2
    top = int(yn.max()) + half_width                      # c ∈ [1, top]
    a_min, a_max = threshold - top, int(yn.max())          # every L(a) read below has a in [a_min, a_max]
    z = np.arange(a_min, a_max + math.ceil(FAR * sigma) + 2, dtype=np.float64)
    log_f = -(z * z) / (2.0 * sigma * sigma)
    tails = np.logaddexp.accumulate(log_f[::-1])[::-1]   # L(a) at index a − a_min

    def log_tail(a: np.ndarray) -> np.ndarray:
        return tails[a - a_min]

    def upper(c: np.ndarray) -> np.ndarray:               # P_c[Y ≥ y | Y ≥ T], increasing in c
        return np.exp(log_tail(yn - c) - log_tail(threshold - c))

    def lower(c: np.ndarray) -> np.ndarray:               # P_c[Y ≤ y | Y ≥ T], decreasing in c
        return -np.expm1(log_tail(yn + 1 - c) - log_tail(threshold - c))

    # c_lo: the least c ≥ 1 with upper(c) ≥ α/2 (at c = y + h it holds: upper ≥ P[Z ≥ −h] ≥ 1/2)
    left, right = np.zeros_like(yn), yn + half_width      # upper(left) < α/2 or left = 0; upper(right) ≥ α/2
    while np.any(right - left > 1):
        mid = (left + right) // 2
        ok = upper(np.maximum(mid, 1)) >= alpha2
        right, left = np.where(ok, mid, right), np.where(ok, left, mid)
    c_lo = np.maximum(right, 1)
    # c_hi: the greatest c in [1, y + h] with lower(c) ≥ α/2; where none, C(y) is empty and [1, y] is reported
    left, right = np.ones_like(yn), yn + half_width + 1   # lower(left) ≥ α/2 (or left = 1); lower(right) < α/2
    ok1 = lower(left) >= alpha2
    while np.any(right - left > 1):
        mid = (left + right) // 2
        ok = lower(mid) >= alpha2
        left, right = np.where(ok, mid, left), np.where(ok, right, mid)
    c_lo, c_hi = np.where(ok1, c_lo, 1), np.where(ok1, left, yn)
    lo[near], hi[near] = np.minimum(c_lo, c_hi), np.maximum(c_lo, c_hi)     # (the hull where c_lo > c_hi: σ ≪ 1)
    return lo, hi


__all__ = ["selected_count_interval"]
