"""Exact discrete Gaussian (CKS20) from the PRF bit stream, and why float counts leak (Mironov 2012)."""
import math
from fractions import Fraction

import numpy as np
import pytest
from reference_discrete import ReferenceBitStream, bernoulli_exp
from reference_discrete import discrete_gaussian as reference_gaussian
from reference_discrete import discrete_gaussian_array as reference_array
from scipy.special import ndtri
from scipy.stats import chisquare

from duckdp import discrete
from duckdp.discrete import DiscreteGaussian, discrete_gaussian, discrete_gaussian_array
from duckdp.prf import BitStream, PRFKey
from duckdp.rng import Randomness

# σ from tiny to large: non-integer doubles (long denominators), integers, and zcdp_sigma-like values.
SIGMAS = (0.3, 1.0, 7.5, 1e3, 1e6, 4605.236852654758, 0.01, 3.7e9)


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
    bits = ReferenceBitStream(PRFKey.from_seed(3))
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


def test_bit_stream_matches_the_reference_stream():
    """BitStream (one encryptor, small refills) gives the 32-block reference stream's bits for any read sizes."""
    rng = np.random.default_rng(4)
    new, ref = BitStream(PRFKey.from_seed(11)), ReferenceBitStream(PRFKey.from_seed(11))
    sizes = rng.integers(0, 700, 3000)
    assert [new.bits(int(k)) for k in sizes] == [ref.bits(int(k)) for k in sizes]


@pytest.mark.parametrize("sigma", SIGMAS)
def test_array_draws_equal_the_fraction_oracle(sigma):
    """Same (key, counters, σ) ⇒ the same draws as the plain versions of tests/reference_discrete.py (inversion on
    mpmath digits up to σ ≈ 4,900, the Fraction CKS20 sampler above), over thousands of counters (random 128-bit
    counters, negatives included)."""
    key = PRFKey.from_seed(2024).derive(b"aggm", 1)
    rng = np.random.default_rng(int(sigma * 1000) % 2**32)
    n = 2000
    hi = rng.integers(-2**63, 2**63, n, dtype=np.int64)
    lo = np.concatenate([np.arange(n // 2, dtype=np.int64), rng.integers(-2**63, 2**63, n - n // 2, dtype=np.int64)])
    assert np.array_equal(discrete_gaussian_array(key, hi, lo, sigma), reference_array(key, hi, lo, sigma))


@pytest.mark.parametrize("sigma", SIGMAS)
def test_stream_draws_equal_the_fraction_oracle(sigma):
    """Count release draws one count after another from one stream: the same draws, stream position included."""
    new, ref = Randomness(77).stream(), ReferenceBitStream(PRFKey.from_seed(77).derive(b"bits", 0))
    assert [discrete_gaussian(new, sigma) for _ in range(1500)] == [reference_gaussian(ref, sigma) for _ in range(1500)]


def test_oracle_comparison_has_power(monkeypatch):
    """CKS20 (σ = 10⁶): a sampler that skipped the lowest-terms reduction (so it reads more bits per Bernoulli) is
    caught. Inversion (σ = 7.5): survival digits of a σ 5 % off, or one z off, are caught."""
    key, hi, lo = PRFKey.from_seed(5), np.zeros(300, np.uint64), np.arange(300, dtype=np.uint64)
    expected = reference_array(key, hi, lo, 1e6)
    with monkeypatch.context() as patch:
        patch.setattr("duckdp.discrete.math.gcd", lambda a, b: 1)
        assert not np.array_equal(discrete_gaussian_array(key, hi, lo, 1e6), expected)
    expected = reference_array(key, hi, lo, 7.5)
    real = discrete._survival
    with monkeypatch.context() as patch:
        patch.setattr(discrete, "_survival", lambda s, top: real(s * 1.05, top))
        assert not np.array_equal(discrete_gaussian_array(key, hi, lo, 7.5), expected)
    with monkeypatch.context() as patch:
        patch.setattr(discrete, "_survival", lambda s, top: (lambda d: d[-1:] + d[:-1])(real(s, top)))
        assert not np.array_equal(discrete_gaussian_array(key, hi, lo, 7.5), expected)


def test_invalid_sigma_is_refused():
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="sigma"):
            DiscreteGaussian(bad)


def test_inversion_ties_and_tails_equal_the_reference(monkeypatch):
    """Draws by inversion where most keys need more than the first step: 3-bit steps (a tie in one of ~8 keys per
    comparison, settled by later digits) and a range cut to |z| < 3 (σ = 3.7: most draws in the tails, drawn by
    `draw_at_least` and its mirror) — equal to the plain version; later digits read for the wrong z are caught
    (power). (Exact inversion does not depend on the step where no tail is drawn: 3- and 4-bit steps agree there.)"""
    key = PRFKey.from_seed(31)
    hi, lo = np.zeros(400, np.uint64), np.arange(400, dtype=np.uint64)
    with monkeypatch.context() as patch:
        patch.setattr(discrete, "_STEP", 3)
        got = discrete_gaussian_array(key, hi, lo, 3.7)
        assert np.array_equal(got, reference_array(key, hi, lo, 3.7, step=3))
        real = discrete._survival_bits
        patch.setattr(discrete, "_survival_bits", lambda s, z, b: real(s, z + 1, b))
        assert not np.array_equal(discrete_gaussian_array(key, hi, lo, 3.7), got)
    monkeypatch.setattr(discrete, "_inversion_range", lambda sigma: 3)
    got = discrete_gaussian_array(key, hi, lo, 3.7)
    assert (np.abs(got) >= 3).mean() > 0.3 and np.array_equal(got, reference_array(key, hi, lo, 3.7))


def test_inversion_law_with_its_tails(monkeypatch):
    """20,000 draws at σ = 2.5 with the range cut to |z| < 2 (the tails drawn by rejection): chi-square against the
    exact pmf on −6…6 (p > 10⁻³); the same test rejects σ·1.1 (power)."""
    monkeypatch.setattr(discrete, "_inversion_range", lambda sigma: 2)
    n = 20000
    hi, lo = np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64)
    draws = discrete_gaussian_array(PRFKey.from_seed(32), hi, lo, 2.5)
    support = np.arange(-6, 7)
    ys = np.arange(-60, 61)

    def pvalue(sigma: float) -> float:
        w = np.exp(-ys.astype(float) ** 2 / (2 * sigma * sigma))
        p = np.exp(-support.astype(float) ** 2 / (2 * sigma * sigma)) / w.sum()
        tail = (1 - p.sum()) / 2
        observed = [np.sum(draws < -6)] + [np.sum(draws == y) for y in support] + [np.sum(draws > 6)]
        return chisquare(observed, np.array([tail, *p, tail]) * n).pvalue

    assert pvalue(2.5) > 1e-3 and pvalue(2.75) < 1e-6
