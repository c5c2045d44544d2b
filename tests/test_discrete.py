"""Exact discrete Gaussian (CKS20) from the PRF bit stream, and why float counts leak (Mironov 2012)."""
import math
from fractions import Fraction

import numpy as np
from scipy.special import ndtri
from scipy.stats import chisquare

from duckdp.discrete import bernoulli_exp, discrete_gaussian
from duckdp.rng import Randomness


def _pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    ys = np.arange(-60, 61)
    w = np.exp(-ys.astype(float) ** 2 / (2 * sigma * sigma))
    return np.exp(-support.astype(float) ** 2 / (2 * sigma * sigma)) / w.sum()


def _chi2_pvalue(draws: np.ndarray, sigma: float) -> float:
    """Chi-square of the draws against N_Z(0, σ²) on −4..4 with both tails pooled."""
    inner = np.arange(-4, 5)
    p = _pmf(sigma, inner)
    observed = [np.sum(draws < -4)] + [np.sum(draws == y) for y in inner] + [np.sum(draws > 4)]
    tail = (1 - p.sum()) / 2
    expected = np.array([tail, *p, tail]) * draws.size
    return chisquare(observed, expected).pvalue


def test_discrete_gaussian_pmf_is_exact():
    bits = Randomness(2024).stream()
    draws = np.array([discrete_gaussian(bits, 1.5) for _ in range(6000)])
    assert _chi2_pvalue(draws, 1.5) > 1e-3
    assert _chi2_pvalue(draws, 1.7) < 1e-4                   # power: a 13 % wrong σ is rejected
    assert abs(draws.mean()) < 4 * 1.5 / math.sqrt(draws.size)


def test_bernoulli_exp_frequency():
    bits = Randomness(3).stream()
    for gamma in (Fraction(1, 3), Fraction(5, 2)):
        n = 4000
        hits = sum(bernoulli_exp(bits, gamma) for _ in range(n))
        p = math.exp(-float(gamma))
        assert abs(hits / n - p) < 4 * math.sqrt(p * (1 - p) / n)


def test_seeded_stream_reproduces():
    draws = [[discrete_gaussian(s, 100.0) for _ in range(20)] for s in (Randomness(9).stream(), Randomness(9).stream())]
    assert draws[0] == draws[1] != [discrete_gaussian(Randomness(10).stream(), 100.0) for _ in range(20)]


def _reachable(y: np.ndarray, count: float, sigma: float) -> np.ndarray:
    """Whether each float y equals fl(count + σ·Φ⁻¹(u)) for some u = (j + ½)·2⁻⁵³ (the old release's
    grid): bisection for the smallest j with f(j) ≥ y (f is non-decreasing), then f(j) == y."""
    f = lambda j: count + sigma * ndtri((j.astype(np.float64) + 0.5) * 2.0**-53)  # noqa: E731
    lo, hi = np.zeros(y.size, np.int64), np.full(y.size, 2**53 - 1, np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        up = f(mid) >= y
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid + 1)
    return f(lo) == y


def test_float_counts_had_unreachable_outputs_integer_counts_do_not():
    """The old count release y = c + σ·Φ⁻¹(u): in ≥ 1 % of releases y could not come from c + 1
    (Mironov 2012; the issue measured 3.1–3.5 %). The new one releases integers, reachable from
    every neighbour since N_Z has full support."""
    sigma, count = 4605.236852654758, 100_000.0          # the paper's defaults' σ (Rogers eq. (2))
    rng = np.random.default_rng(0)
    j = rng.integers(0, 2**53, 3000)
    y = count + sigma * ndtri((j.astype(np.float64) + 0.5) * 2.0**-53)
    assert _reachable(y, count, sigma).all()                       # sanity: the true count reaches all
    unreachable = 1 - _reachable(y, count + 1, sigma).mean()
    print(f"old float release: {unreachable:.2%} of outputs unreachable from count + 1")
    assert unreachable > 0.01
    bits = Randomness(1).stream()
    new = np.array([int(count) + discrete_gaussian(bits, sigma) for _ in range(200)])
    assert new.dtype == np.int64 and np.all(new == np.round(new))
