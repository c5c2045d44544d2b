"""duckdp.explain_aggregate: the plan `aggregate` runs, read without data — the same plan, the same interval
half-widths as the released `_low`/`_high` columns, the threshold's users table against an independent tail
computation, the selection's tables as `duckdp.explain` gives them, bad input, and the CLI."""
from __future__ import annotations

import json

import duckdb
import numpy as np
import pytest
from reference_discrete import tail_probability

import duckdp
from duckdp.cli import main
from duckdp.errors import InvalidParameter
from duckdp.privacy.aggregate import mean_interval
from duckdp.privacy.selective import selected_count_interval

METRICS = {"raters": "users", "ratings": "count", "stars": ("sum", "rating", 1, 5), "avg": ("mean", "rating", 1, 5)}


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("CREATE TABLE r AS SELECT i % 400 AS user_id, (i * 7919) % 23 AS item, 1 + (i % 5) AS rating "
              "FROM range(20000) t(i)")
    yield c
    c.close()


@pytest.mark.parametrize("keys,extra", [("adaptive_sips", {}), ("threshold", {"pre_threshold": 2}),
                                        ("count_gaussian", {"pre_threshold": 3}), ("public", {})])
def test_the_plan_is_the_one_aggregate_runs_and_its_half_widths_are_the_released_ones(con, keys, extra):
    """Same arguments → the same AggregatePlan (σ, split, links, half-widths); every released users/count/sum
    interval is the released number ± the explained half-width, exactly (sums on a power-of-two grid)."""
    common = dict(rho=0.5, delta=1e-6, max_contributions=10, confidence=0.9, **extra)
    ex = duckdp.explain_aggregate(METRICS, keys=keys, **common)
    agg = duckdp.aggregate(con, "r", by="item", metrics=METRICS, seed=3,
                           keys=list(range(23)) if keys == "public" else keys, **common)
    assert agg.plan == ex.plan
    out = agg.to_arrow()
    assert out.num_rows > 0
    for m in ex.metrics:
        if m.kind == "mean":
            continue
        value, low, high = (out[c].to_numpy() for c in (m.metric, f"{m.metric}_low", f"{m.metric}_high"))
        assert np.all(high - value == m.half_width), m
        if m.kind == "sum":
            assert np.all(value - low == m.half_width), m
        else:                                          # counts' intervals are clamped at 0
            assert np.all(low == np.maximum(value - m.half_width, 0)), m


def test_a_means_interval_at_its_midpoint_is_the_sums_over_the_smallest_count():
    """At a centred sum of 0 and noisy count n (mean = the grid midpoint 3), the box's widest corner is
    h_S·step/(n − h_C), clamped to the bounds' half-range 2: computed here from the plan's readings."""
    ex = duckdp.explain_aggregate({"avg": ("mean", "rating", 1, 5)}, keys="public", rho=0.5, delta=1e-6,
                                  max_contributions=10, counts=[5, 40, 100, 1000, 10**6])
    (m,) = ex.metrics
    hs, hc = ex.plan.reading("avg", "sum").half_width, ex.plan.reading("avg", "count").half_width
    step = ex.plan.measure("avg", "sum").step
    assert ex.plan.measure("avg", "sum").offset * step == 3.0
    want = [2.0 if n <= hc else min(2.0, hs * step / (n - hc)) for n in m.counts]
    assert m.counts == (5, 40, 100, 1000, 10**6)
    assert np.allclose(m.mean_half_widths, want, rtol=1e-9, atol=0)    # (offset + S/C)·step − offset·step: cancellation
    assert m.mean_half_widths[0] == 2.0 and m.mean_half_widths[-1] < 1e-3


@pytest.mark.parametrize("pre_threshold", [1, 4])
def test_threshold_users_are_the_smallest_reaching_each_release_probability(pre_threshold):
    """users_50/users_95 against P[users − (k − 1) + Z ≥ T] summed independently (mpmath, θ₃ normaliser): the
    smallest user counts reaching 50 % and 95 %; one user fewer falls short."""
    ex = duckdp.explain_aggregate({"n": "users"}, keys="threshold", rho=0.3, delta=1e-6, max_contributions=20,
                                  pre_threshold=pre_threshold)
    t = ex.plan.threshold
    assert t is not None and ex.threshold_users is not None

    def p(users: int) -> float:
        gap = t.threshold - (users - (pre_threshold - 1))
        return float(tail_probability(t.sigma, gap, 200) if gap >= 1 else 1 - tail_probability(t.sigma, 1 - gap, 200))

    for users, target in ((ex.threshold_users.users_50, 0.5), (ex.threshold_users.users_95, 0.95)):
        assert users is not None and p(users) >= target > p(users - 1)
    base = duckdp.explain_aggregate({"n": "users"}, keys="threshold", rho=0.3, delta=1e-6, max_contributions=20)
    assert ex.threshold_users.users_50 == base.threshold_users.users_50 + pre_threshold - 1


def test_the_selection_is_explained_as_explain_does_at_the_selection_budget():
    ex = duckdp.explain_aggregate(METRICS, keys="dpsips", epsilon=1, delta=1e-6, max_contributions=30,
                                  truncation="global", keys_per_user=[1, 3, 30])
    sb = ex.plan.selection_budget
    assert ex.selection is not None and sb is not None
    ref = duckdp.explain("dpsips", rho=sb.rho, delta=sb.delta, max_contributions=30, truncation="global",
                         keys_per_user=[1, 3, 30])
    assert ex.selection.to_arrow().equals(ref.to_arrow())
    text = str(ex)
    assert "selection by dpsips" in text and "users for ≥50 %" in text and "stars" in text


@pytest.mark.parametrize("kwargs,message", [
    ({"keys": ["a", "b"]}, "which public keys"),
    ({"keys": "nope"}, "'threshold' or 'public'"),
    ({"max_contributions": "auto"}, "chosen from the data"),
    ({"confidence": None}, "confidence is required"),
    ({"confidence": 1.5}, "confidence must be in"),
    ({"keys": "weighted_gaussian", "pre_threshold": 3}, "no privacy proof"),
    ({"delta": None}, "delta"),
    ({"counts": []}, "counts must be"),
    ({"keys": "public", "iterations": 3}, "unknown parameters"),
])
def test_bad_arguments_are_duckdp_errors(kwargs, message):
    args = {"keys": "adaptive_sips", "rho": 0.5, "delta": 1e-6} | kwargs
    with pytest.raises(InvalidParameter, match=message):
        duckdp.explain_aggregate(METRICS, **args)


def test_cli_prints_the_explanation_and_json(capsys):
    argv = ["explain-aggregate", "--metric", "raters=users", "--metric", "avg=mean:rating:1:5", "--keys", "threshold",
            "--rho", "0.5", "--delta", "1e-6", "--max-contributions", "50", "--counts", "20", "200"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "users for ≥ 50 %" in text and "at 200 rows" in text
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ex = duckdp.explain_aggregate({"raters": "users", "avg": ("mean", "rating", 1, 5)}, keys="threshold", rho=0.5,
                                  delta=1e-6, max_contributions=50, counts=[20, 200])
    assert out["metrics"] == ex.to_arrow().to_pylist()
    assert out["threshold_users"] == {"users_50": ex.threshold_users.users_50,
                                      "users_95": ex.threshold_users.users_95}
    assert main(["explain-aggregate", "--metric", "x=median:v:0:1", "--rho", "1", "--delta", "1e-6"]) == 2


def test_a_threshold_read_means_interval_is_the_releases_given_the_threshold():
    """keys="threshold" with a declared mean (its count is the threshold's draw): below T no key is released
    (NaN, said in words); at T and above the half-range is that of the release's box with the count's interval
    given the release (privacy/selective.py), not the noise's C ± h."""
    ex = duckdp.explain_aggregate({"n": "users", "avg": ("mean", "rating", 1, 5)}, keys="threshold", rho=0.5,
                                  delta=1e-6, max_contributions=50, not_null="rating", counts=[10, 200, 5000])
    plan, (_, m) = ex.plan, ex.metrics
    t = plan.threshold
    ms, rs, rc = plan.measure("avg", "sum"), plan.reading("avg", "sum"), plan.reading("avg", "count")
    assert m.threshold_draw and np.isnan(m.mean_half_widths[0]) and "never released" in str(ex)
    y = np.array([200, 5000])
    c_lo, c_hi = selected_count_interval(y, t.threshold, t.sigma, rc.coverage, rc.half_width)
    lo, hi = mean_interval(np.zeros(2), c_lo, c_hi, 1.0, 5.0, ms.step, ms.offset, rs.half_width)
    assert np.allclose(m.mean_half_widths[1:], (hi - lo) / 2, rtol=1e-12)
