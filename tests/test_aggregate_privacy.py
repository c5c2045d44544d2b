"""Privacy core of private GROUP BY (docs/specs/private-group-by.md): plan validation, σ from ℓ2
sensitivity, exact budget split, the keyed discrete Gaussian array, confidence, threshold, means."""
import math

import numpy as np
import pytest
from scipy.stats import chi2

from duckdp.discrete import discrete_gaussian_array
from duckdp.errors import InvalidParameter
from duckdp.prf import PRFKey
from duckdp.privacy.aggregate import (
    DEFAULT_SELECTION_SHARE,
    DEFAULT_THRESHOLD_SHARE,
    THRESHOLD_TAG,
    Metric,
    finish,
    finish_mean,
    grid_bounds,
    grid_step,
    half_width,
    mean_interval,
    parse_metrics,
    plan_aggregate,
    threshold_for,
)
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.calibration import per_item_tail

METRICS = {"raters": "users", "ratings": "count", "stars": ("sum", "rating", 1, 5), "avg": ("mean", "rating", 1, 5)}


def pmf(sigma: float, ys: np.ndarray) -> np.ndarray:
    """Exact N_Z(0, σ²) probabilities (normaliser summed far into the tails)."""
    n = int(60 * sigma) + 60
    norm = math.fsum(np.exp(-np.arange(-n, n + 1, dtype=float) ** 2 / (2 * sigma**2)))
    return np.exp(-np.asarray(ys, dtype=float) ** 2 / (2 * sigma**2)) / norm


def plan(budget=None, metrics=None, **kw):
    kw.setdefault("max_contributions", 4)
    kw.setdefault("keys", "select")
    if kw["keys"] == "select":
        kw.setdefault("algo", "dpsips")
    return plan_aggregate(budget or ZCDP(0.5, 1e-6), METRICS if metrics is None else metrics, **kw)


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("spec, match", [
    ({"x": "median"}, "kind must be one of"),
    ({"x": ("sum", "v", 5, 1)}, "lower must be < upper"),
    ({"x": ("sum", "v", 1, 1)}, "lower must be < upper"),
    ({"x": ("mean", "v", 0, math.inf)}, "finite"),
    ({"x": ("mean", "v", True, 2)}, "must be a number"),
    ({"x": ("sum", "", 0, 1)}, "needs a column name"),
    ({"x": ("sum", None, 0, 1)}, "needs a column name"),
    ({"x": ("sum", "v", 0)}, "give 'users', 'count'"),
    ({"x": ("sum", "v", -1.7e308, 1.7e308)}, "overflows"),
    ({"": "count"}, "non-empty string"),
    ({}, "non-empty dict"),
])
def test_bad_metric_specs_are_refused(spec, match):
    with pytest.raises(InvalidParameter, match=match):
        parse_metrics(spec)


def test_metric_specs_parse_in_order():
    ms = parse_metrics(METRICS)
    assert [m.name for m in ms] == list(METRICS)
    assert ms[2] == Metric("stars", "sum", "rating", 1.0, 5.0)
    with pytest.raises(InvalidParameter, match="takes no column"):
        Metric("n", "count", "rating")


@pytest.mark.parametrize("kw, match", [
    ({"max_contributions": 0}, "max_contributions"),
    ({"max_rows_per_key": 0}, "max_rows_per_key"),
    ({"max_rows_per_key": 1.5}, "max_rows_per_key"),
    ({"selection_share": 1.0}, "selection_share must be in"),
    ({"selection_share": 0}, "selection_share must be in"),
    ({"confidence": 1.0}, "confidence must be in"),
    ({"metric_shares": {"raters": 1.0}}, "exactly the metrics"),
    ({"metric_shares": {"raters": 0.5, "ratings": 0.5, "stars": 0.5, "avg": -0.5}}, "> 0 and sum to 1"),
    ({"keys": "all"}, "keys must be one of"),
    ({"keys": "threshold", "algo": "dpsips"}, "algo names"),
    ({"keys": "public", "selection_share": 0.3}, "public keys"),
    ({"keys": "public", "pre_threshold": 5}, "public keys"),
    ({"algo": "dpsips", "pre_threshold": 5}, "no privacy proof for the weighted selection 'dpsips'"),
    ({"algo": "adaptive_sips", "pre_threshold": 2}, "no privacy proof"),
    ({"keys": "threshold", "metrics": {"n": "users"}, "selection_share": 0.5}, "whole budget"),
    ({"keys": "threshold", "metric_shares": {"raters": 0.25, "ratings": 0.25, "stars": 0.25, "avg": 0.25}},
     r"\['raters', 'ratings'\] read the threshold's noisy count"),
    ({"keys": "threshold", "metrics": {"n": "users"}, "metric_shares": {"n": 1.0}}, "does not apply"),
    ({"confidence": 0.9, "metrics": {"a": "count", "a_low": "users"}}, "distinct"),
])
def test_bad_plans_are_refused(kw, match):
    with pytest.raises(InvalidParameter, match=match):
        plan(**kw)


def test_default_selection_share_is_the_measured_one():
    assert plan().selection_share == 0.4 and plan().selection_budget.rho == pytest.approx(0.2, rel=1e-15)


def test_pre_threshold_allowed_where_proved():
    for kw in ({"algo": "count_gaussian"}, {"algo": "count_laplace"}, {"keys": "threshold"}):
        assert plan(pre_threshold=10, **kw).pre_threshold == 10


# ---------------------------------------------------------------- σ and the split

def test_sigma_uses_l2_sensitivity():
    """σ = Δ2/√(2ρ_m): count m√Δ0, users √Δ0, sum m·max(|lo|, |hi|)·√Δ0 — ℓ1 (Δ0·…) would double them here."""
    p = plan(max_contributions=4, max_rows_per_key=3, selection_share=0.4,
             metrics={"n": "users", "c": "count", "s": ("sum", "v", -2, 6)})
    rho_m = 0.5 * 0.6 / 3
    step = grid_step(-2.0, 6.0)
    assert step == 2.0**-13 and grid_bounds(-2.0, 6.0, step) == (-16384, 49152)
    expected = {"users": 2.0, "count": 3 * 2.0, "sum": 3 * 49152 * 2.0}
    for m in p.measures:
        assert m.rho == pytest.approx(rho_m, rel=1e-12)
        assert m.sigma == pytest.approx(expected[m.part] / math.sqrt(2 * rho_m), rel=1e-11)
        assert m.sigma >= expected[m.part] / math.sqrt(2 * m.rho)           # rounded up, never down


@pytest.mark.parametrize("budget", [ZCDP(0.5, 1e-6), ZCDP(3e-3, 1e-9), EpsDelta(1.0, 1e-6)])
@pytest.mark.parametrize("keys", ["select", "threshold", "public"])
@pytest.mark.parametrize("kw", [{"max_rows_per_key": 2}, {"not_null": "rating"}])   # the latter: threshold's C'
def test_sigma_reproduces_each_measures_rho(budget, keys, kw):
    p = plan(budget, keys=keys, **kw)
    for m in p.measures:
        if m.rho:
            achieved = m.sensitivity**2 / (2 * m.sigma**2)
            assert m.rho * (1 - 1e-11) <= achieved <= m.rho
    parts = [m.rho for m in p.measures] + [p.selection_budget.rho if p.selection_budget else 0.0]
    parts.append(p.threshold.rho if p.threshold else 0.0)
    assert math.fsum(parts) == p.rho


def test_mean_is_a_centred_sum_and_a_count_splitting_its_share():
    p = plan(keys="public", metrics={"avg": ("mean", "rating", 1, 5)}, max_contributions=9)
    s, c = p.measure("avg", "sum"), p.measure("avg", "count")
    assert s.rho + c.rho == 0.5 and s.rho == c.rho
    lo, hi = grid_bounds(1.0, 5.0, s.step)
    assert s.offset == (lo + hi) // 2 and s.sensitivity == (hi - s.offset) * 3 and c.sensitivity == 3
    assert s.tag != c.tag


@pytest.mark.parametrize("keys", ["select", "threshold", "public"])
def test_spent_never_exceeds_the_request(keys):
    for rho in (1e-3, 0.1, 1.0, 10.0):
        for delta in (1e-9, 1e-5):
            p = plan(ZCDP(rho, delta), keys=keys)
            assert p.spent.rho == p.rho == rho and p.spent.zcdp_delta <= delta
            assert p.zcdp_delta == (0.0 if keys == "public" else delta)
    for eps in (0.1, 1.0, 5.0):
        for delta in (1e-9, 1e-5):
            p = plan(EpsDelta(eps, delta), keys=keys)
            assert p.spent.epsilon <= eps and p.spent.delta <= delta
            assert p.spent.epsilon >= eps * (1 - 1e-6)                     # and nearly all of it is used


def test_threshold_mode_reuses_the_threshold_for_users():
    p = plan(keys="threshold", max_contributions=3, selection_share=0.5)
    users = p.measure("raters", "users")
    assert users.rho == 0 and users.sigma == p.threshold.sigma and users.tag == THRESHOLD_TAG
    assert THRESHOLD_TAG not in [m.tag for m in p.measures if m.rho]        # metrics draw fresh noise
    assert p.threshold.sigma == pytest.approx(math.sqrt(3) / math.sqrt(2 * 0.25), rel=1e-11)
    only = plan(keys="threshold", metrics={"n": "users"})
    assert only.threshold.rho == only.rho == 0.5 and only.selection_share == 1.0


DECLARED = {"u": "users", "avg": ("mean", "v", 1, 5)}


def test_threshold_mode_at_one_row_per_key_is_one_draw_for_users_count_and_denominators():
    """keys="threshold", m = 1 (spec §4.2): the measures read the pairs the threshold counted, one row each, so
    users, count and a declared column's mean count are the threshold's one draw; the mean's centred sum is the
    only budgeted draw and gets the metrics' whole part. Charged: ρ_sel + ρ_S, exactly the request."""
    p = plan(metrics=DECLARED, keys="threshold", not_null=["v"])
    assert len(p.measures) == 2                                     # was 3: users, avg.sum, avg.count
    thr, s = p.measure("u", "users"), p.measure("avg", "sum")
    assert thr.tag == THRESHOLD_TAG and p.measure("avg", "count") is thr and thr.sigma == p.threshold.sigma
    assert p.selection_share == DEFAULT_THRESHOLD_SHARE == 0.6 and plan().selection_share == DEFAULT_SELECTION_SHARE
    assert s.rho == pytest.approx((1 - p.selection_share) * 0.5, rel=1e-12)
    assert math.fsum([p.threshold.rho, s.rho]) == p.rho == 0.5
    with_count = plan(metrics={"n": "count"} | DECLARED, keys="threshold", not_null=["v"])
    assert len(with_count.measures) == 2 and with_count.measure("n", "count") is with_count.measure("u", "users")
    assert [r.metric for r in with_count.measure("u", "users").readers] == ["n", "u", "avg"]
    # a nullable column's mean divides by its own non-NULL count (its own draw, half the mean's part)
    nullable = plan(metrics=DECLARED, keys="threshold")
    assert len(nullable.measures) == 3 and nullable.measure("avg", "count").tag != THRESHOLD_TAG
    # m = 2: rows ≠ users, so count (and the declared mean's count) is its own draw
    two = plan(metrics={"n": "count"} | DECLARED, keys="threshold", not_null=["v"], max_rows_per_key=2)
    assert len(two.measures) == 3 and two.measure("n", "count") is two.measure("avg", "count")
    assert two.measure("n", "count").tag != THRESHOLD_TAG
    # only metrics the threshold answers: it gets the whole budget
    only = plan(keys="threshold", metrics={"u": "users", "n": "count"})
    assert len(only.measures) == 1 and only.threshold.rho == only.rho == 0.5 and only.selection_share == 1.0


def test_threshold_finish_shifts_every_reader_of_the_threshold_draw():
    """pre_threshold = k: the threshold's noisy c = users − (k − 1) is shifted back for users, count and a
    mean's denominator alike (post-processing of one draw)."""
    p = plan(metrics={"n": "count"} | DECLARED, keys="threshold", not_null=["v"], pre_threshold=3)
    s = p.measure("avg", "sum")
    c = np.array([5, 40])
    out = finish(p, {("n", "users"): c, (s.metric, s.part): np.array([0, 10 * 2**14])})
    assert out["n"].tolist() == out["u"].tolist() == [7, 42]
    assert out["avg"] == pytest.approx(finish_mean(np.array([0, 10 * 2**14]), c + 2, 1, 5, s.step, s.offset))

# ---------------------------------------------------------------- discrete Gaussian array

def chi_square(draws: np.ndarray, sigma: float, cut: int) -> tuple[float, int]:
    ys = np.arange(-cut + 1, cut)
    expected = pmf(sigma, ys) * draws.size
    tail = draws.size - expected.sum()
    observed = np.array([np.sum(draws == y) for y in ys])
    obs = np.append(observed, np.sum(np.abs(draws) >= cut))
    exp = np.append(expected, tail)
    return float(np.sum((obs - exp) ** 2 / exp)), obs.size - 1


@pytest.mark.parametrize("sigma, cut", [(0.8, 3), (1.5, 5)])
def test_array_sampler_matches_the_exact_pmf(sigma, cut):
    """Chi-square against the exact pmf at the 0.999 quantile; the same test rejects σ·1.15 (power)."""
    n = 5000
    key = PRFKey.from_seed(20).derive(b"aggm", 0)
    draws = discrete_gaussian_array(key, np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64), sigma)
    stat, df = chi_square(draws, sigma, cut)
    assert stat < chi2.ppf(0.999, df)
    wrong = discrete_gaussian_array(key, np.ones(n, np.uint64), np.arange(n, dtype=np.uint64), sigma * 1.15)
    assert chi_square(wrong, sigma, cut)[0] > chi2.ppf(0.999, df)


def test_array_sampler_is_keyed_per_counter_and_reproducible():
    key = PRFKey.from_seed(7).derive(b"aggm", 3)
    hi, lo = np.zeros(50, np.uint64), np.arange(50, dtype=np.uint64)
    a = discrete_gaussian_array(key, hi, lo, 40.0)
    assert np.array_equal(a, discrete_gaussian_array(PRFKey.from_seed(7).derive(b"aggm", 3), hi, lo, 40.0))
    sub = discrete_gaussian_array(key, hi[[31, 4, 17]], lo[[31, 4, 17]], 40.0)   # other keys absent, reordered
    assert np.array_equal(sub, a[[31, 4, 17]])
    other = discrete_gaussian_array(PRFKey.from_seed(7).derive(b"aggm", 4), hi, lo, 40.0)
    assert np.mean(other == a) < 0.1                                     # another measure: fresh noise
    assert a.dtype == np.int64 and len(set(a.tolist())) > 25             # fresh per key
    neg = discrete_gaussian_array(key, np.full(2, -1, np.int64), np.array([-5, 5], np.int64), 40.0)
    assert neg.shape == (2,)                                             # int64 counters reinterpreted


# ---------------------------------------------------------------- thresholds and confidence

def test_threshold_is_the_smallest_integer_meeting_the_tail():
    for sigma, delta, d0 in ((2.3, 1e-3, 3), (7.1, 1e-6, 20), (0.6, 1e-4, 1)):
        t = threshold_for(sigma, delta, d0)
        q = float(per_item_tail(delta, np.float64(d0)))
        ys = np.arange(0, int(60 * sigma) + 60)
        p = pmf(sigma, ys)                      # P[Z ≥ s] = Σ p[s:] for s ≥ 0
        assert math.fsum(p[t - 1:]) <= q < math.fsum(p[t - 2:])


@pytest.mark.parametrize("sigma, conf", [(0.9, 0.9), (3.7, 0.95), (250.0, 0.5)])
def test_half_width_is_minimal_and_covers(sigma, conf):
    h = half_width(sigma, conf)
    ys = np.arange(-h, h + 1)
    assert math.fsum(pmf(sigma, ys)) >= conf > math.fsum(pmf(sigma, ys[1:-1]))


def test_tail_bounds_hold_beyond_the_summed_range():
    from duckdp.privacy.aggregate import _upper_tail
    assert 0 < _upper_tail(200, 2.0)                                     # beyond 40σ + 40: a bound, not 0
    for t in (1, 3, 9):                                                  # the bound is ≥ the exact tail
        exact = math.fsum(pmf(2.0, np.arange(t, 200)))
        assert exact <= _upper_tail(t, 2.0) <= exact * (1 + 1e-8)


def test_half_width_bound_above_the_exact_range_is_at_most_one_step_wide():
    sigma, conf = 5000.0, 0.95
    h = half_width(sigma, conf)
    p = pmf(sigma, np.arange(-3 * 5000, 3 * 5000 + 1))
    cover = lambda w: math.fsum(p[15000 - w:15000 + w + 1])      # noqa: E731
    assert cover(h) >= conf and cover(h - 2) < conf


def test_confidence_intervals_cover_at_the_nominal_rate():
    p = plan(keys="public", metrics={"n": "count"}, confidence=0.9, budget=ZCDP(0.02, 1e-6))
    m = p.measure("n", "count")
    n = 4000
    key = PRFKey.from_seed(11).derive(b"aggm", m.tag)
    noise = discrete_gaussian_array(key, np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64), m.sigma)
    true = np.full(n, 1000, np.int64)
    out = finish(p, {("n", "count"): true + noise})
    covered = np.mean((out["n_low"] <= true) & (true <= out["n_high"]))
    exact = math.fsum(pmf(m.sigma, np.arange(-m.half_width, m.half_width + 1)))
    assert exact >= 0.9
    assert abs(covered - exact) < 4 * math.sqrt(exact * (1 - exact) / n)


def test_mean_intervals_cover_the_bounded_mean():
    p = plan(keys="public", metrics={"avg": ("mean", "v", 1, 5)}, confidence=0.9, budget=ZCDP(40.0, 1e-6),
             max_contributions=1)
    ms, mc = p.measure("avg", "sum"), p.measure("avg", "count")
    n, rows = 1500, 30
    values = np.linspace(1.5, 4.5, rows)                             # on the grid after rounding
    s_true = int(np.sum(np.round(values / ms.step).astype(np.int64) - ms.offset))
    key = PRFKey.from_seed(12)
    zs = discrete_gaussian_array(key.derive(b"aggm", ms.tag), np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64),
                                 ms.sigma)
    zc = discrete_gaussian_array(key.derive(b"aggm", mc.tag), np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64),
                                 mc.sigma)
    out = finish(p, {("avg", "sum"): s_true + zs, ("avg", "count"): rows + zc})
    truth = (ms.offset + s_true / rows) * ms.step
    covered = (out["avg_low"] <= truth) & (truth <= out["avg_high"])
    assert np.mean(covered) >= 0.9 - 4 * math.sqrt(0.09 / n)
    assert np.mean(out["avg_high"] - out["avg_low"]) < 2.0             # informative, not [1, 5]
    assert np.all((out["avg"] >= 1) & (out["avg"] <= 5))


# ---------------------------------------------------------------- post-processing

def test_finish_mean_clamps_and_handles_non_positive_counts():
    step, off = grid_step(1.0, 5.0), 49152
    mean = finish_mean(np.array([10**9, -10**9, 0, 5, 7]), np.array([3, 3, 4, 0, -2]), 1.0, 5.0, step, off)
    assert mean.tolist() == [5.0, 1.0, off * step, 3.0, 3.0]
    assert off * step == 3.0


def test_mean_interval_falls_back_to_the_range_when_the_count_may_be_zero():
    lo, hi = mean_interval(np.array([0, 0]), np.array([5, 50]) - 5, np.array([5, 50]) + 5, 1.0, 5.0, 1.0, 3, 10)
    assert (lo[0], hi[0]) == (1.0, 5.0)
    assert lo[1] == pytest.approx(3 - 10 / 45) and hi[1] == pytest.approx(3 + 10 / 45)


def test_finish_releases_grid_sums_and_shifts_thresholded_users():
    p = plan(keys="threshold", pre_threshold=5, metrics={"n": "users", "s": ("sum", "v", 0, 8)})
    s = p.measure("s", "sum")
    out = finish(p, {("n", "users"): np.array([3, 40]), ("s", "sum"): np.array([2**15, -3])})
    assert out["n"].tolist() == [7, 44]                   # c + Z + (pre_threshold − 1)
    assert out["s"].tolist() == [2**15 * s.step, -3 * s.step] and s.step == 2.0**-13


# ---------------------------------------------------------------- sensitivity audit (numpy reference stages)

AUDIT_METRICS = {"n": "users", "c": "count", "s": ("sum", "v", -2, 6), "a": ("mean", "v", 1, 5)}


def audit_gaps(not_null: str | None = None, **broken) -> dict:
    """‖M(D ∪ {u}) − M(D)‖₂² / Δ² per measure for an adversarial user u: 5 rows of ~10⁶ on each of 12 keys
    (10 released); ≤ 1 means the plan's sensitivity holds. `not_null="v"` declares the value column, so the
    count counts the sum's rows and the sum buys a centred sum of its own ("A count drawn anyway")."""
    from reference_aggregate import bounded_measures
    p = plan(keys="public", metrics=AUDIT_METRICS, max_contributions=3, max_rows_per_key=2, not_null=not_null)
    rng = np.random.default_rng(5)
    users, keys = rng.integers(0, 40, 400).tolist(), rng.integers(0, 12, 400).tolist()
    values = rng.uniform(-3, 7, 400).round(2).tolist()
    released = list(range(10))
    extra = [(999, k, 1e6 + r) for k in range(12) for r in range(5)]
    u2, k2, v2 = (users + [e[0] for e in extra], keys + [e[1] for e in extra], values + [e[2] for e in extra])
    before = bounded_measures(p, users, keys, values, released, **broken)
    after = bounded_measures(p, u2, k2, v2, released, **broken)
    out = {}
    for ms in p.measures:
        d = after[(ms.metric, ms.part)] - before[(ms.metric, ms.part)]
        out[(ms.metric, ms.part)] = float(sum(int(x) ** 2 for x in d)) / ms.sensitivity**2
    return out


@pytest.mark.parametrize("not_null", [None, "v"])
def test_sensitivity_holds_and_is_tight_for_the_worst_user(not_null):
    gaps = audit_gaps(not_null)
    assert all(g <= 1 + 1e-12 for g in gaps.values()), gaps
    assert gaps[("n", "users")] == pytest.approx(1) and gaps[("c", "count")] == pytest.approx(1)
    assert gaps[("s", "sum")] == pytest.approx(1) and gaps[("a", "sum")] == pytest.approx(1)
    if not_null:        # the sum's own centred sum, on its bounds [-2, 6]
        assert gaps[("s", "centred")] == pytest.approx(1)


@pytest.mark.parametrize("not_null, broken, caught", [
    (None, {"clip": False}, [("s", "sum"), ("a", "sum")]),
    (None, {"cap_rows": False}, [("c", "count"), ("a", "count"), ("s", "sum")]),
    (None, {"cap_keys": False}, [("n", "users"), ("c", "count")]),
    ("v", {"clip": False}, [("s", "sum"), ("s", "centred"), ("a", "sum")]),
    ("v", {"cap_rows": False}, [("c", "count"), ("s", "sum"), ("s", "centred")]),
])
def test_sensitivity_audit_catches_broken_bounds(not_null, broken, caught):
    gaps = audit_gaps(not_null, **broken)
    for m in caught:
        assert gaps[m] > 1.5, (m, gaps[m])


# ---------------------------------------------------------------- shared measures (one draw per distinct quantity)

UCM = {"u": "users", "c": "count", "a": ("mean", "v", 1, 5)}


def test_metrics_reading_one_quantity_share_one_measure():
    """{users, count, mean}: with m = 1 distinct users = rows per key, so users and count read one draw
    (3 measures: rows, the mean's centred sum, the mean's count of non-NULL values); with m = 2 users is its
    own (4). Two means on one column share its count; with the same bounds also the centred sum."""
    one, two = plan(metrics=UCM, max_rows_per_key=1), plan(metrics=UCM, max_rows_per_key=2)
    assert [(m.metric, m.part) for m in one.measures] == [("u", "count"), ("a", "sum"), ("a", "count")]
    assert one.measure("u", "users") is one.measure("c", "count")
    assert [(r.metric, r.role) for r in one.measures[0].readers] == [("u", "users"), ("c", "count")]
    assert [(m.metric, m.part) for m in two.measures] == [("u", "users"), ("c", "count"), ("a", "sum"), ("a", "count")]
    assert len({m.tag for m in one.measures}) == 3 and len({m.tag for m in two.measures}) == 4
    means = plan(metrics={"a": ("mean", "v", 1, 5), "b": ("mean", "v", 1, 5), "w": ("mean", "v", 0, 10),
                          "x": ("mean", "x", 1, 5), "s": ("sum", "v", 1, 5)})
    assert means.measure("a", "sum") is means.measure("b", "sum") is not means.measure("w", "sum")
    assert means.measure("a", "count") is means.measure("b", "count") is means.measure("w", "count")
    assert means.measure("x", "count") is not means.measure("a", "count")
    assert means.measure("s", "sum") not in (means.measure("a", "sum"), means.measure("b", "sum"))
    assert len(means.measures) == 6          # a=b sum, w sum, v count, x sum, x count, s
    assert "one draw read by u.users, c.count" in "\n".join(one.report_lines())


def test_a_shared_quantity_is_charged_once_with_its_readers_combined_share():
    """Each distinct quantity gets the sum of its readers' shares (a mean's share halved over its two), and the
    call's ρ sums each quantity once: charging a shared draw per reader would exceed the request, and charging
    it only one reader's share would leave ρ unspent (and σ too large)."""
    p = plan(ZCDP(0.9, 1e-6), metrics=UCM, selection_share=0.4)
    rest = 0.9 * 0.6
    shared, s, c = p.measures
    assert shared.rho == pytest.approx(rest * 2 / 3, rel=1e-12)                     # users' and count's thirds
    assert s.rho == pytest.approx(rest / 6, rel=1e-12) and c.rho == pytest.approx(rest / 6, rel=1e-12)
    assert shared.sigma == pytest.approx(2 / math.sqrt(2 * rest * 2 / 3), rel=1e-11)       # √Δ0 = 2
    assert math.fsum([p.selection_budget.rho] + [m.rho for m in p.measures]) == p.rho == p.spent.rho == 0.9
    per_reader = math.fsum([p.selection_budget.rho] + [m.rho for m in p.measures for _ in m.readers])
    assert per_reader > 0.9
    shares = plan(ZCDP(0.9, 1e-6), metrics=UCM, selection_share=0.4, metric_shares={"u": 0.5, "c": 0.1, "a": 0.4})
    assert shares.measures[0].rho == pytest.approx(rest * 0.6, rel=1e-12)
    assert shares.measures[1].rho == pytest.approx(rest * 0.2, rel=1e-12)


def test_readers_of_one_draw_release_consistent_numbers_and_their_own_intervals():
    """users == count (one draw), and a mean's denominator is the draw every mean on that column reads; each
    reader keeps its own coverage (a mean's halves at 1 − (1 − c)/2, a count at c)."""
    metrics = UCM | {"b": ("mean", "v", 0, 10)}
    p = plan(keys="public", metrics=metrics, confidence=0.9, max_rows_per_key=1)
    rows, sa, sb, cnt = p.measures[0], p.measure("a", "sum"), p.measure("b", "sum"), p.measure("a", "count")
    assert p.measure("b", "count") is cnt and cnt is not rows
    noisy = {(rows.metric, rows.part): np.array([7, 40]), (sa.metric, sa.part): np.array([0, 80 * 2**14]),
             (sb.metric, sb.part): np.array([0, 0]), (cnt.metric, cnt.part): np.array([5, 40])}
    out = finish(p, noisy)
    assert out["u"].tolist() == out["c"].tolist() == [7, 40]
    assert out["a"].tolist() == [3.0, 5.0] and out["b"].tolist() == [5.0, 5.0]          # 3 + 2 per row, clamped
    assert out["a"][1] == min(5.0, (sa.offset + 80 * 2**14 / 40) * sa.step)
    assert p.reading("u", "users").coverage == p.reading("c", "count").coverage == 0.9
    assert p.reading("a", "count").coverage == p.reading("b", "count").coverage == 0.95
    assert p.reading("a", "count").half_width == half_width(cnt.sigma, 0.95)
    assert p.reading("c", "count").half_width == half_width(rows.sigma, 0.9)
    assert (out["u_high"] - out["u"]).tolist() == [p.reading("u", "users").half_width] * 2


# ---------------------------------------------------------------- declared not-null columns (a mean's count = rows)

def test_not_null_mean_reads_the_row_count_one_draw_fewer_each_sigma_as_computed():
    """{users, count, mean on v}, m = 1: undeclared, 3 draws (rows, centred sum, non-NULL count); with v declared
    not-null the mean's count is the row count users and count read, so 2 draws. The count already holds
    users' and count's parts (2/3 of the metrics' ρ) ≥ the mean's 1/3, so the mean's whole part goes to its
    centred sum (spec §4 "Budget") and each σ is Δ/√(2ρ) of those parts."""
    p = plan(ZCDP(0.9, 1e-6), metrics=UCM, selection_share=0.4, not_null=["v"], max_contributions=4)
    old = plan(ZCDP(0.9, 1e-6), metrics=UCM, selection_share=0.4, max_contributions=4)
    assert len(old.measures) == 3 and len(p.measures) == 2 and p.not_null == ("v",)
    rows, s = p.measures
    assert p.measure("a", "count") is rows is p.measure("u", "users") is p.measure("c", "count")
    assert [(r.metric, r.role) for r in rows.readers] == [("u", "users"), ("c", "count"), ("a", "count")]
    rest = 0.9 * 0.6
    assert rows.rho == pytest.approx(rest * 2 / 3, rel=1e-12) and s.rho == pytest.approx(rest / 3, rel=1e-12)
    assert rows.sigma == pytest.approx(2 / math.sqrt(2 * rest * 2 / 3), rel=1e-11)           # Δ = m√Δ0 = 2
    lo, hi = grid_bounds(1.0, 5.0, s.step)
    assert s.sensitivity == (hi - s.offset) * 2 and s.sigma == pytest.approx(s.sensitivity / math.sqrt(2 * rest / 3))
    old_s, old_c = old.measure("a", "sum"), old.measure("a", "count")
    assert s.sigma < old_s.sigma / math.sqrt(2) * 1.000001 and rows.sigma < old_c.sigma     # both halves gain
    assert math.fsum([p.selection_budget.rho] + [m.rho for m in p.measures]) == p.rho == 0.9
    assert "declared not-null: v" in "\n".join(p.report_lines())
    assert "one draw read by u.users, c.count, a.count" in "\n".join(p.report_lines())


def worst(p, name: str) -> float:
    """A mean's worst-case variance factor 1/ρ_S + 1/ρ_C (spec §4: h²Δ_C²/2 times it)."""
    return 1 / p.measure(name, "sum").rho + 1 / p.measure(name, "count").rho


@pytest.mark.parametrize("others, mean", [(0.2, 0.8), (0.5, 0.5), (0.7, 0.3), (0.02, 0.98)])
def test_a_mean_sharing_its_count_splits_its_part_optimally(others, mean):
    """One mean on a declared column beside a users metric with part a: the plan's split of the mean's part b
    minimises 1/(b − x) + 1/(a + x) over x ∈ [0, b] (checked on a grid), so never worse than its own even split
    (4/b) nor than b/2 each on the shared count; the users metric never gets less than its own part."""
    rho = 2.0
    p = plan(ZCDP(rho, 1e-6), keys="public", metrics={"u": "users", "a": ("mean", "v", 1, 5)},
             metric_shares={"u": others, "a": mean}, not_null="v")
    a, b = others * rho, mean * rho
    xs = np.linspace(0, b, 20001)
    best = float(np.min(1 / (b - xs[:-1]) + 1 / (a + xs[:-1])))
    assert worst(p, "a") == pytest.approx(best, rel=1e-6)
    assert worst(p, "a") <= min(4 / b, 2 / b + 1 / (a + b / 2)) * (1 + 1e-12)
    assert p.measure("u", "users").rho >= a * (1 - 1e-12)
    assert math.fsum(m.rho for m in p.measures) == rho


def test_several_centred_sums_on_one_count_each_split_given_the_others():
    """Means on one column with different bounds read one count; each centred sum S_j keeps min(B_j, t) and the
    count gets t = a + Σ max(0, B_j − t): no budget lost, and no S_j could lower its mean's worst case by
    moving part of its share to or from the count (the others fixed). Undeclared, a count with no other
    reader: the same rule (a = 0); one mean alone keeps the even split."""
    metrics = {"u": "users", "a": ("mean", "v", 1, 5), "b": ("mean", "v", 0, 10), "w": ("mean", "v", -3, 3)}
    shares = {"u": 0.05, "a": 0.5, "b": 0.3, "w": 0.15}
    for declared in (None, ["v"]):
        p = plan(ZCDP(1.0, 1e-6), keys="public", metrics=metrics, metric_shares=shares, not_null=declared)
        c = p.measure("a", "count")
        assert c is p.measure("b", "count") is p.measure("w", "count")
        assert (c is p.measure("u", "users")) == (declared is not None)
        a = shares["u"] if declared else 0.0
        t = c.rho
        parts = {n: shares[n] for n in "abw"}
        assert t == pytest.approx(a + sum(max(0.0, B - t) for B in parts.values()), rel=1e-12)
        for n, B in parts.items():
            assert p.measure(n, "sum").rho == pytest.approx(min(B, t), rel=1e-12)
            for dx in (-1e-4, 1e-4):          # moving dx from S_n to the count: never better for that mean
                s_rho, c_rho = p.measure(n, "sum").rho - dx, t + dx
                if 0 < s_rho <= B:
                    assert 1 / s_rho + 1 / c_rho >= worst(p, n) * (1 - 1e-12)
        assert math.fsum(m.rho for m in p.measures) == p.rho == 1.0
    alone = plan(keys="public", metrics={"avg": ("mean", "rating", 1, 5)}, not_null=["rating"])
    assert alone.measure("avg", "sum").rho == alone.measure("avg", "count").rho == 0.25


@pytest.mark.parametrize("metrics", [None, {"u": "users", "s": ("sum", "rating", 0, 5)},      # a sum's own S_c
                                     {"s": ("sum", "rating", 0, 5), "m": ("mean", "rating", 1, 4)}])
@pytest.mark.parametrize("keys", ["select", "threshold", "public"])
def test_spent_never_exceeds_the_request_with_shared_counts(keys, metrics):
    """The accounting tests' grid with a declared column (shared count, the water-filled split, a sum's own link
    measure — C' or S_c, spec §3.2): Σ parts = ρ."""
    for declared in (None, ["rating"]):
        for rho in (1e-3, 0.1, 1.0, 10.0):
            p = plan(ZCDP(rho, 1e-6), metrics, keys=keys, not_null=declared)
            parts = [m.rho for m in p.measures] + [p.selection_budget.rho if p.selection_budget else 0.0]
            parts.append(p.threshold.rho if p.threshold else 0.0)
            assert math.fsum(parts) == p.rho == p.spent.rho == rho
        for eps in (0.1, 1.0, 5.0):
            p = plan(EpsDelta(eps, 1e-6), metrics, keys=keys, not_null=declared)
            assert p.spent.epsilon <= eps and p.spent.delta <= 1e-6


@pytest.mark.parametrize("not_null, match", [
    (["nope"], "no sum or mean metric reads"),
    ([""], "column name or a list"),
    (3, "column name or a list"),
])
def test_bad_not_null_is_refused(not_null, match):
    with pytest.raises(InvalidParameter, match=match):
        plan(not_null=not_null)
