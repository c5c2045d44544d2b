"""variance / stddev metrics (spec §3.1 "Spreads"): the plan (a mean's two quantities plus a centred sum of
squares, half the share each way, ℓ2 sensitivity m·h²·√Δ0, coverage split three ways), the engine's true
integers (zero noise: the population variance of the bounded values), the sensitivity audit with power, the
interval over the box (against a grid search, and coverage at fixed seeds), and the CLI and explain."""
from __future__ import annotations

import dataclasses
import math
from unittest import mock

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from test_aggregate import ratings, worst_ratio

import duckdp
from duckdp.cli import main
from duckdp.privacy.aggregate import Metric, finish, finish_variance, grid_bounds, plan_aggregate, variance_interval
from duckdp.privacy.budget import ZCDP

SPREAD = {"n": "users", "var": ("variance", "rating", 1, 5), "sd": ("stddev", "rating", 1, 5),
          "avg": ("mean", "rating", 1, 5)}


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    yield c
    c.close()


def test_plan_reads_a_means_quantities_and_a_sum_of_squares():
    p = plan_aggregate(ZCDP(0.6, 1e-6), SPREAD, max_contributions=9, max_rows_per_key=2, keys="public",
                       confidence=0.9)
    q = p.measure("var", "squares")
    assert p.measure("sd", "squares") is q and p.measure("var", "sum") is p.measure("avg", "sum")
    assert p.measure("var", "count") is p.measure("avg", "count")
    lo, hi = grid_bounds(1, 5, q.step)
    h = max(q.offset - lo, hi - q.offset)
    assert q.offset == (lo + hi) // 2 and q.sensitivity == 2 * h * h * 3           # m·h²·√Δ0
    assert q.sigma == pytest.approx(q.sensitivity / math.sqrt(2 * q.rho))
    # shares: n, var, sd, avg a quarter each; var and sd give half of theirs to Q
    assert q.rho == pytest.approx(0.6 / 4)
    assert math.fsum(m.rho for m in p.measures) == pytest.approx(0.6, rel=1e-15) and p.rho == 0.6
    cov = {(r.metric, r.role): r.coverage for m in p.measures for r in m.readers}
    assert cov[("var", "squares")] == cov[("var", "sum")] == cov[("sd", "count")] == pytest.approx(1 - 0.1 / 3)
    assert cov[("avg", "sum")] == pytest.approx(0.95) and cov[("n", "users")] == 0.9


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("not_null", [None, "rating"])
def test_with_zero_noise_the_release_is_the_bounded_population_variance(con, m, not_null):
    """Every user keeps every key (Δ0 ≥ keys) and every row (≤ m per key): with the noise zeroed, variance and
    stddev are the population variance and its root of the clipped values on the grid (NULLs dropped, or read as
    the midpoint where declared)."""
    rng = np.random.default_rng(4)
    pairs = [(u, k) for u in range(300) for k in range(6) if rng.random() < 0.5]
    reps = rng.integers(1, m + 1, len(pairs))                    # ≤ m rows per (user, key): every row is kept
    users = np.repeat([u for u, _ in pairs], reps)
    items = np.repeat([k for _, k in pairs], reps)
    vals = rng.uniform(0, 6, users.size).round(2)
    vals[rng.random(users.size) < 0.1] = np.nan
    t = pa.table({"user_id": users, "item": items, "rating": pa.array(vals, from_pandas=True)})
    zero = mock.patch("duckdp.aggregate_noise.noise",
                      lambda r, tag, hi, lo, sigma, ranks=None, pool=None, floors=None: np.zeros(hi.size, np.int64))
    with zero:
        agg = duckdp.aggregate(con, t, by="item", metrics=SPREAD, keys=list(range(6)), rho=1.0, delta=1e-6,
                               max_contributions=10, max_rows_per_key=m, not_null=not_null, seed=2)
    out = agg.to_arrow()
    step = agg.plan.measure("var", "sum").step
    con.register("t_spread", t)
    fill = "coalesce(rating, 3.0)" if not_null else "rating"          # (greatest/least skip NULLs: filter first)
    want = con.sql(f"SELECT item, var_pop(round(least(greatest({fill}, 1), 5) / {step}) * {step}) "
                   f"FROM t_spread WHERE {fill} IS NOT NULL GROUP BY item ORDER BY item").fetchall()
    assert np.allclose(out["var"].to_numpy(), [w for _, w in want], rtol=1e-9, atol=1e-12)
    assert np.allclose(out["sd"].to_numpy(), np.sqrt([w for _, w in want]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("truncation", ["per_user", "global"])
def test_engine_sensitivity_of_the_sum_of_squares_holds_and_broken_bounds_are_caught(con, truncation):
    """The audit of tests/test_aggregate.py on a plan with a variance: the added user's 12 keys of ~10⁶ move the
    centred sum of squares by at most m·h²·√Δ0 — not without the clipping, the row cap or Δ0."""
    plan = plan_aggregate(ZCDP(0.5, 1e-6), {"var": ("variance", "rating", 1, 5)}, max_contributions=4,
                          max_rows_per_key=1, keys="public")
    assert 0.9 < worst_ratio(con, plan, plan, truncation) <= 1.0
    assert worst_ratio(con, dataclasses.replace(plan, max_rows_per_key=10**6), plan, truncation) > 4
    wide = tuple(Metric(m.name, m.kind, m.column, -1e12, 1e12) for m in plan.metrics)
    assert worst_ratio(con, dataclasses.replace(plan, metrics=wide), plan, truncation) > 1e3
    assert worst_ratio(con, dataclasses.replace(plan, max_contributions=12), plan, truncation) > 1.5


def test_the_interval_is_the_range_over_the_box():
    """variance_interval against a grid search of Q/C − S²/C² over the box, for boxes around 0 and away from it,
    C* inside and outside the count's interval, and Q's lower end below 0."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        c1 = rng.uniform(1, 50)
        c2 = c1 + rng.uniform(0, 60)
        q, s = rng.uniform(-100, 5000), rng.uniform(-300, 300)
        hq, hs = int(rng.integers(0, 800)), int(rng.integers(0, 200))
        lo, hi = variance_interval(np.array([q]), np.array([s]), np.array([c1]), np.array([c2]), -1e9, 1e9, 1.0,
                                   hq, hs)
        qs, ss, cs = (np.linspace(a, b, 41) for a, b in ((q - hq, q + hq), (s - hs, s + hs), (c1, c2)))
        g = qs[:, None, None] / cs[None, None, :] - (ss[None, :, None] / cs[None, None, :]) ** 2
        assert lo[0] <= max(g.min(), 0.0) + 1e-9 and hi[0] >= g.max() - 1e-9 * max(1.0, abs(g.max()))
        s_near = 0.0 if s - hs <= 0 <= s + hs else min(abs(s - hs), abs(s + hs))   # and attained: a finer search
        fine = (q + hq) / np.linspace(c1, c2, 20001) - (s_near / np.linspace(c1, c2, 20001)) ** 2
        assert hi[0] <= max(fine.max(), 0.0) + 1e-6 * max(1.0, abs(hi[0]))


def test_the_interval_covers_at_fixed_seeds():
    """Keys of 60 and 400 rows with known variance: the plan's noise drawn 4,000 times (exact discrete Gaussian
    by pmf, fixed seed) and finished; the interval covers the true variance ≥ 90 % − 4.5 sd of the time."""
    p = plan_aggregate(ZCDP(2.0, 1e-6), {"v": ("variance", "x", 0, 10)}, max_contributions=5, keys="public",
                       confidence=0.9)
    rng = np.random.default_rng(11)
    mq, ms, mc = (p.measure("v", r) for r in ("squares", "sum", "count"))
    lo_g, hi_g = grid_bounds(0, 10, ms.step)
    for rows in (60, 400):
        k = rng.integers(lo_g, hi_g + 1, rows) - ms.offset                 # centred grid values
        true_q, true_s, true_c = int((k * k).sum()), int(k.sum()), rows
        truth = (true_q / true_c - (true_s / true_c) ** 2) * ms.step**2
        draws = 4000

        def noise(sigma: float, draws: int = draws) -> np.ndarray:
            return np.rint(rng.normal(0, sigma, draws)).astype(np.int64)   # σ ≥ 3: rounding ≈ N_Z in law

        noisy = {("v", "squares"): true_q + noise(mq.sigma), ("v", "sum"): true_s + noise(ms.sigma),
                 ("v", "count"): true_c + noise(mc.sigma)}
        out = finish(p, noisy)
        covered = np.mean((out["v_low"] <= truth) & (truth <= out["v_high"]))
        assert covered >= 0.9 - 4.5 * math.sqrt(0.09 / draws), (rows, covered)
        assert np.all(out["v"] == finish_variance(noisy[("v", "squares")], noisy[("v", "sum")],
                                                  noisy[("v", "count")], 0, 10, ms.step))


def test_cli_and_explain_take_spreads(con, tmp_path, capsys):
    import pyarrow.parquet as pq
    pq.write_table(ratings(), tmp_path / "r.parquet")
    argv = ["aggregate", str(tmp_path / "r.parquet"), "--by", "item", "--metric", "v=variance:rating:1:5",
            "--metric", "s=stddev:rating:1:5", "--keys", "threshold", "--rho", "1", "--delta", "1e-6",
            "--confidence", "0.9", "--seed", "1", "-o", str(tmp_path / "o.parquet")]
    assert main(argv) == 0
    out = pq.read_table(tmp_path / "o.parquet")
    assert out.column_names == ["item", "v", "v_low", "v_high", "s", "s_low", "s_high"]
    v = out["v"].to_numpy()
    assert np.allclose(out["s"].to_numpy() ** 2, v) and np.all((v >= 0) & (v <= 4))
    ex = duckdp.explain_aggregate({"v": ("variance", "rating", 1, 5)}, keys="public", rho=1, delta=1e-6,
                                  counts=[100, 10_000])
    (m,) = ex.metrics
    assert m.counts == (100, 10_000) and m.mean_half_widths[1] < m.mean_half_widths[0] <= 2.0
    assert "for values spread evenly over the bounds" in str(ex)
