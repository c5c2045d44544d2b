"""Golden values and properties of σ, thresholds and conversions."""
import math

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import laplace, norm

from duckdp.mechanisms import get
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    gaussian_threshold,
    laplace_threshold,
    zcdp_sigma,
)
from duckdp.privacy.conversions import approx_zcdp_epsilon, approx_zcdp_to_dp, zcdp_delta


def plan(algo, budget, d0=100):
    return get(algo).plan(budget, d0, {})[0]


@pytest.mark.parametrize("budget, sigma, threshold", [
    (EpsDelta(1, 1e-5), 3.884141, 20.789744),            # issue #2 golden, Gopi et al. Thm 5.1
    (EpsDelta(3, math.exp(-10)), 1.3327913, 6.8236610),   # Gopi et al. journal, reddit setting
    (ZCDP(0.1, 1e-5), 2.2360680, 11.7260702),            # DP-SIPS Alg. 2 / README of shared data
])
def test_weighted_gaussian_golden(budget, sigma, threshold):
    p = plan("weighted_gaussian", budget)
    assert p.scale == pytest.approx(sigma, abs=1e-6)
    assert p.threshold == pytest.approx(threshold, abs=1e-6)


def test_sigma_satisfies_analytic_condition_and_is_minimal():
    s = analytic_gaussian_sigma(1.0, 5e-6)
    assert analytic_gaussian_delta(s, 1.0) <= 5e-6
    assert analytic_gaussian_delta(s * (1 - 1e-9), 1.0) > 5e-6


def test_threshold_is_the_max_over_k_computed_independently():
    """Against 40-digit arithmetic (mpmath): equal to 1e-12 and never below (rounded up)."""
    mp.mp.dps = 40
    sigma, delta, d0 = 2.0, 1e-6, 50
    exact = max(1 / mp.sqrt(k) + sigma * mp.sqrt(2) * mp.erfinv(2 * (1 - mp.mpf(delta)) ** (mp.mpf(1) / k) - 1)
                for k in range(1, d0 + 1))
    t = gaussian_threshold(sigma, delta, d0)
    assert t == pytest.approx(float(exact), rel=1e-12)
    assert t >= float(exact)
    lam = 0.5
    brute_l = max(1 / t + lam * math.log(1 / (2 * (1 - (1 - delta) ** (1 / t)))) for t in range(1, d0 + 1))
    assert laplace_threshold(lam, delta, d0) == pytest.approx(brute_l, rel=1e-9)


def test_laplace_and_count_plans():
    wl = plan("weighted_laplace", EpsDelta(1, 1e-5))
    assert wl.scale == 1.0
    # Thm B.1 at t = Δ0 = 100 dominates: 1/100 + log(1/(2·(1−(1−δ)^{1/100})))
    q = -math.expm1(math.log1p(-1e-5) / 100)
    assert wl.threshold == pytest.approx(0.01 + math.log(1 / (2 * q)), rel=1e-12)
    cl = plan("count_laplace", EpsDelta(1, 1e-5))
    assert cl.scale == 100.0 and cl.threshold == pytest.approx(1 + 100 * math.log(1 / (2 * q)), rel=1e-12)
    cg = plan("count_gaussian", ZCDP(0.1, 1e-5))
    assert cg.scale == pytest.approx(10 * 2.2360680, rel=1e-7)
    qg = -math.expm1(math.log1p(-1e-5) / 100)
    assert cg.threshold == pytest.approx(1 - cg.scale * norm.ppf(qg), rel=1e-9)


def test_novel_user_release_probability_is_at_most_delta():
    """The threshold's purpose: a user with k novel items gets any released w.p. ≤ δ_novel, for all k."""
    for budget in (EpsDelta(1, 1e-3), ZCDP(0.1, 1e-3)):
        p = plan("weighted_gaussian", budget, 30)
        d_novel = budget.delta / 2 if isinstance(budget, EpsDelta) else budget.delta
        for k in range(1, 31):
            miss = norm.cdf((p.threshold - 1 / math.sqrt(k)) / p.scale) ** k
            assert 1 - miss <= d_novel * (1 + 1e-9)
    p = plan("weighted_laplace", EpsDelta(1, 1e-3), 30)
    for k in range(1, 31):
        assert 1 - laplace.cdf(p.threshold - 1 / k, scale=p.scale) ** k <= 1e-3 * (1 + 1e-9)


def test_monotonicity():
    ts = [plan("weighted_gaussian", EpsDelta(1, 1e-5), d).threshold for d in (1, 2, 10, 100, 1000)]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    sig = [analytic_gaussian_sigma(e, 1e-6) for e in (0.1, 0.5, 1, 2, 8)]
    assert sig == sorted(sig, reverse=True)


def test_zcdp_conversion_matches_dpsips_tables():
    # DP-SIPS App. B, Table 4: ρ=0.1, δ=1e-5, ε=1.765 → δ_DP = 4.96e-5 at α = 9.86
    assert approx_zcdp_to_dp(0.1, 1e-5, 1.765) == pytest.approx(4.96e-5, rel=5e-3)
    assert zcdp_delta(0.1, 1.765)[1] == pytest.approx(9.86, abs=0.01)
    # Table 5: ρ=0.0083, δ=1e-5, ε=0.62 → 1.01e-5 at α = 39.398
    assert approx_zcdp_to_dp(0.0083, 1e-5, 0.62) == pytest.approx(1.01e-5, rel=5e-3)
    eps = approx_zcdp_epsilon(0.1, 1e-5, 4.96e-5)
    assert eps == pytest.approx(1.765, abs=2e-3)
    assert approx_zcdp_to_dp(0.1, 1e-5, eps) <= 4.96e-5 * (1 + 1e-9)


def test_zcdp_sigma():
    assert zcdp_sigma(0.5) == pytest.approx(1.0, rel=1e-11) and zcdp_sigma(0.5) >= 1.0


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(1e-3, 50), delta=st.floats(1e-15, 0.5), d0=st.integers(1, 100_000))
def test_calibration_finite_and_monotone(eps, delta, d0):
    s = analytic_gaussian_sigma(eps, delta / 2)
    assert math.isfinite(s) and s > 0
    assert analytic_gaussian_sigma(eps * 1.5, delta / 2) <= s
    t = gaussian_threshold(s, delta / 2, d0)
    assert math.isfinite(t)
    assert gaussian_threshold(s, delta / 2, d0 + 1) >= t - 1e-12 * abs(t)
    assert gaussian_threshold(s, delta / 4, d0) >= t - 1e-12 * abs(t)
    assert math.isfinite(laplace_threshold(1 / eps, delta, d0))


def test_conversion_of_tiny_rho_with_generous_delta():
    """δ-approximate ρ-zCDP with ρ → 0 already gives the target δ_DP at ε → 0 (no root to find)."""
    assert approx_zcdp_epsilon(0.001, 0.4, 0.64) == pytest.approx(1e-12)
    assert approx_zcdp_to_dp(0.001, 0.4, 1e-12) <= 0.64


def test_laplace_scale_is_rounded_up():
    """λ = Δ1/ε never below the real quotient: float(1/3) is 1 ulp below 1/3 (issue #14 item 10)."""
    from fractions import Fraction

    from duckdp.privacy.calibration import laplace_scale

    assert Fraction(1.0 / 3) < Fraction(1, 3)                     # the float quotient rounds down
    for algo, sensitivity in (("weighted_laplace", 1), ("policy_laplace", 1), ("count_laplace", 100)):
        scale = get(algo).plan(EpsDelta(3, 1e-5), 100, get(algo).check_params({}))[0].scale
        assert Fraction(scale) * 3 >= sensitivity and Fraction(math.nextafter(scale, 0)) * 3 < sensitivity
    gw = get("gw").plan(EpsDelta(3, 1e-5), 100, get("gw").check_params({"allow_unproven": True}))[0]
    assert Fraction(gw.scale) >= Fraction(1, 3)
    for eps in (0.1, 0.3, 0.7, 1.0, 2.0, 3.0, 5.0, 7.0, 1e-3, math.pi):
        for sens in (1.0, 3.0, 100.0):
            lam = laplace_scale(eps, sens)
            assert Fraction(lam) * Fraction(eps) >= Fraction(sens)            # rounded up …
            assert Fraction(math.nextafter(lam, 0)) * Fraction(eps) < Fraction(sens)  # … by at most 1 ulp
    assert laplace_scale(1.0) == 1.0 and laplace_scale(0.5) == 2.0          # exact quotients stay exact
