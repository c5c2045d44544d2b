"""keys="threshold"'s count intervals given the release (duckdp/privacy/selective.py): equal to a brute-force
inversion of the conditional tests with exact tails, the noise's y ± h far above the threshold, conditional
coverage at fixed seeds where the old y ± h falls well short (the test's power), and end to end through
duckdp.aggregate for the users metric and a mean dividing by the threshold's count."""
from __future__ import annotations

import duckdb
import mpmath
import numpy as np
import pytest

import duckdp
from duckdp.privacy.aggregate import finish, half_width, mean_interval, plan_aggregate
from duckdp.privacy.budget import ZCDP
from duckdp.privacy.selective import FAR, selected_count_interval


def _pmf(sigma: float, lo: int, hi: int) -> dict[int, mpmath.mpf]:
    """Unnormalised exp(−z²/2σ²) for z in [lo, hi], at 80 digits (the normaliser cancels in every ratio)."""
    with mpmath.workdps(80):
        return {z: mpmath.exp(-mpmath.mpf(z) ** 2 / (2 * mpmath.mpf(sigma) ** 2)) for z in range(lo, hi + 1)}


def _reference(y: int, t: int, sigma: float, coverage: float, h: int) -> tuple[int, int]:
    """The accepted counts c ∈ [1, y + h + 3] by the definition, with tails summed from the pmf."""
    reach = int(60 * sigma) + 10
    f = _pmf(sigma, t - (y + h + 3) - 1, y + reach)
    alpha2 = (1 - coverage) / 2

    def tail(a: int) -> mpmath.mpf:
        return mpmath.fsum(v for z, v in f.items() if z >= a)

    kept = [c for c in range(1, y + h + 4)
            if tail(y - c) / tail(t - c) >= alpha2 and 1 - tail(y + 1 - c) / tail(t - c) >= alpha2]
    if not kept:                                             # y too low for every c ≥ 1: [1, y] (a superset)
        return 1, y
    assert kept == list(range(kept[0], kept[-1] + 1))        # an interval, as monotone likelihood ratio says
    return kept[0], kept[-1]


@pytest.mark.parametrize("sigma,t,coverage", [(2.5, 9, 0.9), (7.0, 30, 0.95), (7.0, 30, 0.5), (30.123, 150, 0.95),
                                              (60.0, 40, 0.95)])   # σ² ≫ T/α: y near T is low for every c
def test_the_interval_is_the_brute_force_inversion(sigma, t, coverage):
    h = half_width(sigma, coverage)
    ys = np.array(sorted({t, t + 1, t + 2, t + int(sigma), t + int(3 * sigma), t + int(6 * sigma)}))
    lo, hi = selected_count_interval(ys, t, sigma, coverage, h)
    for y, a, b in zip(ys.tolist(), lo.tolist(), hi.tolist(), strict=True):
        assert (a, b) == _reference(y, t, sigma, coverage, h), (y, sigma)


def test_an_empty_set_is_reported_as_at_most_the_count():
    """σ = 5000, T = 30000 (a small budget): a released y within ~20 of T is below every c's α/2 quantile given
    release, so the test keeps no c; the interval is [1, y], not a point."""
    sigma, t = 5000.0, 30000
    h = half_width(sigma, 0.95)
    lo, hi = selected_count_interval(np.array([t, t + 5, t + 3 * int(sigma)]), t, sigma, 0.95, h)
    assert (lo[:2].tolist(), hi[:2].tolist()) == ([1, 1], [t, t + 5])
    assert 1 < lo[2] < t + 3 * sigma < hi[2]


def test_far_above_the_threshold_it_is_the_noises_interval():
    sigma, t, h = 12.0, 70, half_width(12.0, 0.95)
    y = np.array([t + 20 * int(sigma), t + int(FAR * sigma) + h, t + int(FAR * sigma) + h + 10_000, 10**12])
    lo, hi = selected_count_interval(y, t, sigma, 0.95, h)
    assert lo.tolist() == (y - h).tolist() and hi.tolist() == (y + h).tolist()


def _discrete_gaussian(rng: np.random.Generator, sigma: float, n: int) -> np.ndarray:
    """n draws of N_Z(0, σ²) from its pmf on |z| ≤ 40σ (mass outside < e^-800)."""
    z = np.arange(-int(40 * sigma) - 1, int(40 * sigma) + 2)
    p = np.exp(-z.astype(np.float64) ** 2 / (2 * sigma * sigma))
    return rng.choice(z, size=n, p=p / p.sum())


@pytest.mark.parametrize("sigma,t", [(3.0, 12), (9.13, 52)])
def test_coverage_given_release_and_the_noises_interval_falls_short(sigma, t):
    """For true counts from T − 2σ to T + σ, 40,000 draws each (seed fixed): among released draws the interval
    covers c at ≥ 95 % − 4.5 sd; the noise's y ± h (the old interval) misses that by > 10 sd at c = T − 2σ."""
    rng = np.random.default_rng(7)
    coverage, h, checked = 0.95, half_width(sigma, 0.95), False
    for c in range(t - int(2 * sigma), t + int(sigma) + 1):
        y = c + _discrete_gaussian(rng, sigma, 40_000)
        y = y[y >= t]
        if y.size < 400:
            continue
        lo, hi = selected_count_interval(y, t, sigma, coverage, h)
        sd = np.sqrt(coverage * (1 - coverage) / y.size)
        got = np.mean((lo <= c) & (c <= hi))
        assert got >= coverage - 4.5 * sd, (c, got, y.size)
        if c == t - int(2 * sigma):
            old = np.mean(np.abs(y - c) <= h)
            assert old < coverage - 10 * sd, (c, old)
            checked = True
    assert checked


def test_aggregate_threshold_intervals_hold_given_release():
    """keys="threshold" with pre_threshold 2: the users interval is the conditional one (shifted back by
    pre_threshold − 1) and the declared mean divides S's box by it; keys near the threshold get intervals
    reaching below their noisy count by more than h."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT u, k, (u * 31 + k) % 5 AS v FROM range(6000) a(u), range(60) b(k) "
                "WHERE u < 20 + k * k")
    agg = duckdp.aggregate(con, "t", by="k", user_col="u", metrics={"n": "users", "m": ("mean", "v", 0, 4)},
                           keys="threshold", rho=0.05, delta=1e-6, max_contributions=60, pre_threshold=2,
                           confidence=0.9, not_null="v", seed=5)
    out, plan = agg.to_arrow(), agg.plan
    n = out["n"].to_numpy()
    th, rd = plan.threshold, plan.reading("n", "users")
    lo, hi = selected_count_interval(n - 1, th.threshold, th.sigma, rd.coverage, rd.half_width)
    assert out["n_low"].to_numpy().tolist() == (lo + 1).tolist()
    assert out["n_high"].to_numpy().tolist() == (hi + 1).tolist()
    assert np.any(n - out["n_low"].to_numpy() > rd.half_width)        # near the threshold: lower than y − h
    assert agg.report().count("hold given the release") == 1


def test_a_mean_dividing_by_the_threshold_count_uses_its_conditional_interval():
    """finish() on a keys="threshold" plan with a declared mean: the mean's interval is the box of its sum's
    S ± h_S and the count's interval given the release — the noise's C ± h_C would leave a near-threshold key's
    true count out of the box."""
    plan = plan_aggregate(ZCDP(0.05, 1e-6), {"n": "users", "m": ("mean", "v", 0, 4)}, max_contributions=60,
                          keys="threshold", confidence=0.9, not_null="v")
    th, rc, rs, ms = (plan.threshold, plan.reading("m", "count"), plan.reading("m", "sum"), plan.measure("m", "sum"))
    y = np.array([th.threshold, th.threshold + 3, th.threshold + 400])
    s = np.array([-1000, 250_000, 0])
    out = finish(plan, {("n", "users"): y, ("m", "sum"): s})
    c_lo, c_hi = selected_count_interval(y, th.threshold, th.sigma, rc.coverage, rc.half_width)
    lo, hi = mean_interval(s, c_lo, c_hi, 0.0, 4.0, ms.step, ms.offset, rs.half_width)
    assert out["m_low"].tolist() == lo.tolist() and out["m_high"].tolist() == hi.tolist()
    assert c_lo[0] < y[0] - rc.half_width and (c_lo[2], c_hi[2]) == (y[2] - rc.half_width, y[2] + rc.half_width)
