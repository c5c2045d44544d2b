"""Golden values and properties of σ, thresholds and conversions."""
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import laplace, norm

import duckdp
from duckdp.errors import InvalidParameter
from duckdp.mechanisms import get
from duckdp.mechanisms.base import Params
from duckdp.prf import standard, uniform_from_words
from duckdp.privacy.budget import MIN_DELTA, ZCDP, EpsDelta, make_budget
from duckdp.privacy.calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    gaussian_threshold,
    laplace_threshold,
    zcdp_sigma,
)
from duckdp.privacy.conversions import approx_zcdp_epsilon, approx_zcdp_to_dp, zcdp_delta


def plan(algo, budget, d0=100):
    return get(algo).plan(budget, Params(d0))[0]


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
        scale = get(algo).plan(EpsDelta(3, 1e-5), Params(100, get(algo).check_params({})))[0].scale
        assert Fraction(scale) * 3 >= sensitivity and Fraction(math.nextafter(scale, 0)) * 3 < sensitivity
    gw = get("gw").plan(EpsDelta(3, 1e-5), Params(100, get("gw").check_params({"allow_unproven": True})))[0]
    assert Fraction(gw.scale) >= Fraction(1, 3)
    for eps in (0.1, 0.3, 0.7, 1.0, 2.0, 3.0, 5.0, 7.0, 1e-3, math.pi):
        for sens in (1.0, 3.0, 100.0):
            lam = laplace_scale(eps, sens)
            assert Fraction(lam) * Fraction(eps) >= Fraction(sens)            # rounded up …
            assert Fraction(math.nextafter(lam, 0)) * Fraction(eps) < Fraction(sens)  # … by at most 1 ulp
    assert laplace_scale(1.0) == 1.0 and laplace_scale(0.5) == 2.0          # exact quotients stay exact


# -- the δ floor (issue #18 §2; argument beside MIN_DELTA in duckdp/privacy/budget.py) -------------
def test_min_delta_is_2_to_the_minus_32():
    assert MIN_DELTA == 2.0**-32 == 2**20 * 2.0**-52          # 2²⁰ cells of the 2⁵²-cell noise grid


@pytest.mark.parametrize("delta", [1e-300, 1e-13, 1e-12, 2e-10, math.nextafter(MIN_DELTA, 0)])
def test_delta_below_the_floor_is_refused_before_any_data_is_read(con, delta):
    """Every entry point refuses it; "missing" is no table, so reaching the data would be another error."""
    calls = [lambda: make_budget(epsilon=1, delta=delta), lambda: make_budget(rho=0.1, delta=delta),
             lambda: duckdp.select(con, "missing", algo="weighted_gaussian", epsilon=1, delta=delta),
             lambda: duckdp.select(con, "missing", algo="dpsips", rho=0.1, delta=delta),
             lambda: duckdp.count_release(con, "missing", rho=0.1, delta=delta, delta_per_call=delta / 2),
             lambda: duckdp.explain("weighted_gaussian", epsilon=1, delta=delta),
             lambda: duckdp.Session(con, epsilon=1, delta=delta)]
    for call in calls:
        with pytest.raises(InvalidParameter, match="below the floor MIN_DELTA"):
            call()
    s = duckdp.Session(con, epsilon=1, delta=1e-5)
    with pytest.raises(InvalidParameter, match="below the floor MIN_DELTA"):
        s.select("missing", algo="weighted_gaussian", epsilon=0.5, delta=delta)
    assert len(s.ledger) == 0


def test_delta_at_the_floor_is_accepted(con):
    con.execute("CREATE TABLE t AS SELECT i % 50 AS user_id, 'k' || (i % 7) AS item FROM range(400) r(i)")
    assert make_budget(epsilon=1, delta=MIN_DELTA).delta == MIN_DELTA
    for algo in ("weighted_gaussian", "dpsips", "weighted_laplace"):
        r = duckdp.select(con, "t", algo=algo, epsilon=1, delta=MIN_DELTA, max_contributions=4, seed=1)
        assert r.budget.delta == MIN_DELTA and r.spent.delta <= MIN_DELTA
    s = duckdp.Session(con, rho=1.0, delta=MIN_DELTA)
    s.select("t", algo="dpsips", rho=0.5, delta=MIN_DELTA, max_contributions=4, seed=1)


def test_thresholds_at_the_floor_stay_inside_the_noise_grid():
    """At δ = MIN_DELTA and Δ0 = 100 the largest noise the grid can draw still clears every threshold's
    noise term, so the planned δ_j are attainable (a threshold beyond the grid would only be safer)."""
    top = float(standard("gaussian", uniform_from_words(np.array([2**64 - 1], dtype=np.uint64)))[0])
    lap = float(standard("laplace", uniform_from_words(np.array([2**64 - 1], dtype=np.uint64)))[0])
    assert top == pytest.approx(8.2095, abs=1e-4) and lap == pytest.approx(36.0437, abs=1e-4)
    for algo, budget in [("weighted_gaussian", EpsDelta(1, MIN_DELTA)), ("dpsips", ZCDP(0.5, MIN_DELTA)),
                         ("weighted_laplace", EpsDelta(1, MIN_DELTA))]:
        mech = get(algo)
        for r in mech.plan(budget, Params(100, mech.check_params({}))):
            limit = top if r.noise == "gaussian" else lap
            assert r.threshold < r.scale * limit, (algo, r.threshold / r.scale)
