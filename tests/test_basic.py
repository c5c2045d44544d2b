"""Basic mechanisms: SQL weights vs numpy reference, released counts vs exact expectation, audit."""
import math

import numpy as np
import pytest
from conftest import halve_thresholds, leftovers, make_table, random_sets
from reference_basic import EXPONENT, basic_weights
from scipy.stats import chi2, laplace, norm

import duckdp
from duckdp.mechanisms import get
from duckdp.mechanisms.base import Params
from duckdp.mechanisms.basic import basic_weights as engine_weights
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.calibration import gaussian_release_probability, laplace_release_probability
from duckdp.rng import Randomness
from duckdp.run import RunContext
from duckdp.source import resolve
from duckdp.stages.duckdb import DuckDBStages

ALGOS = list(EXPONENT)


def sql_weights(con, table, exponent, d0, seed=0, item_col="item"):
    ctx = RunContext(con, resolve(con, table, "user_id", item_col, "t"), Randomness(seed))
    try:
        text, params = engine_weights(DuckDBStages(ctx), d0, exponent)
        return {r[0]: r[1] for r in con.sql(text, params=params).fetchall()}
    finally:
        ctx.close()


@pytest.mark.parametrize("algo", ALGOS)
def test_sql_weights_equal_reference(con, algo):
    for seed in range(3):
        users, items = random_sets(300, 80, 12, seed)
        make_table(con, "t", users, items)
        ref = basic_weights(users, [f"i{i}" for i in items], EXPONENT[algo], 12)
        got = sql_weights(con, "t", EXPONENT[algo], 12, seed)
        assert got.keys() == ref.keys()
        for k in ref:
            assert got[k] == pytest.approx(ref[k], rel=1e-12, abs=1e-12)


def test_truncation_keeps_exactly_min_size_and_weights_use_kept_size(con):
    users, items = random_sets(200, 500, 40, 1)
    make_table(con, "t", users, items)
    ctx = RunContext(con, resolve(con, "t", "user_id", "item", "t"), Randomness(3))
    try:
        text, params = engine_weights(DuckDBStages(ctx), 10, 0.0)
        total = con.sql(f"SELECT sum(_dp_w) FROM ({text})", params=params).fetchall()[0][0]
        text, params = engine_weights(DuckDBStages(ctx), 10, 0.5)
        l2 = con.sql(f"SELECT sum(_dp_w) FROM ({text})", params=params).fetchall()[0][0]
    finally:
        ctx.close()
    sizes = np.bincount(users)
    kept = np.minimum(sizes[sizes > 0], 10)
    assert total == kept.sum()                       # each user keeps min(|W|, Δ0) keys
    assert l2 == pytest.approx(np.sqrt(kept).sum())  # each adds kept/√kept = √kept in total


@pytest.mark.slow
def test_truncation_is_uniform_per_user(con):
    """A user with 20 items keeps each with probability Δ0/20 across salts (keyed-hash subsample)."""
    make_table(con, "t", np.zeros(20, dtype=np.int64), np.arange(20))
    hits = np.zeros(20)
    runs = 400
    for seed in range(runs):
        w = sql_weights(con, "t", 0.0, 5, seed)
        for k in w:
            hits[int(k[1:])] += 1
    p = 5 / 20
    se = math.sqrt(p * (1 - p) / runs)
    assert np.all(np.abs(hits / runs - p) < 4.5 * se)


def _expected(algo, budget, weights, d0):
    plan = get(algo).plan(budget, Params(d0))[0]
    w = np.array(list(weights.values()))
    if plan.noise == "gaussian":
        return plan, gaussian_release_probability(w, plan.scale, plan.threshold)
    return plan, laplace_release_probability(w, plan.scale, plan.threshold)


STAT_CASES = [("weighted_gaussian", ZCDP(0.1, 1e-5)), ("weighted_gaussian", EpsDelta(1.0, 1e-5)),
              ("weighted_laplace", EpsDelta(3.0, 1e-5)), ("count_gaussian", ZCDP(0.05, 1e-5)),
              ("count_laplace", EpsDelta(3.0, 1e-5))]


@pytest.mark.parametrize("algo, budget", STAT_CASES)
@pytest.mark.slow
def test_released_count_matches_exact_expectation(con, algo, budget):
    users, items = random_sets(10000, 5000, 8, 11)
    make_table(con, "t", users, items)
    _, p = _expected(algo, budget, basic_weights(users, items, EXPONENT[algo], 8), 8)
    var = float(np.sum(p * (1 - p)))
    assert var > 10, "instance must have many items near the threshold for the test to have power"
    counts = []
    for seed in range(30):
        kw = budget.as_dict()
        counts.append(len(duckdp.select(con, "t", algo=algo, max_contributions=8, seed=seed, **kw).to_arrow()))
    counts = np.array(counts, dtype=float)
    n = len(counts)
    assert abs(counts.mean() - p.sum()) < 4 * math.sqrt(var / n)
    stat = (n - 1) * counts.var(ddof=1) / var          # ~ χ²(n−1) if Var = Σ p(1−p)
    assert chi2.ppf(1e-4, n - 1) < stat < chi2.ppf(1 - 1e-4, n - 1)


AUDIT_CASES = [("weighted_gaussian", ZCDP(0.5, 0.2)), ("weighted_gaussian", EpsDelta(1.0, 0.2)),
               ("weighted_laplace", EpsDelta(1.0, 0.2)), ("count_gaussian", EpsDelta(1.0, 0.2)),
               ("count_laplace", EpsDelta(1.0, 0.2))]


def _novel_release_rate(con, algo, budget, d0, runs, broken=False, monkeypatch=None):
    """Share of trials in which a novel user gets any key released. Each run holds REPLICAS
    disjoint novel users (independent trials: noise is fresh per key), so trials = runs × REPLICAS."""
    if broken:
        halve_thresholds(monkeypatch, algo)
    hits = 0
    for seed in range(runs):
        r = duckdp.select(con, "novel", algo=algo, max_contributions=d0, seed=10_000 + seed, **budget.as_dict())
        hits += len({k.split("_")[0] for k in r.to_arrow().column(0).to_pylist()})
    return hits / (runs * REPLICAS)


REPLICAS = 100


@pytest.mark.parametrize("algo, budget", AUDIT_CASES)
def test_audit_novel_user(con, monkeypatch, algo, budget):
    """D' = D + one user with Δ0 keys nobody else holds. On D these keys are never released, so
    (ε, δ)-DP needs P[any novel key released | D'] ≤ δ_novel (δ/2 for (ε,δ), δ for zCDP)."""
    d0 = 6
    users = np.repeat(np.arange(REPLICAS), d0)
    make_table(con, "novel", users, [f"{u}_{j}" for u in range(REPLICAS) for j in range(d0)], item_prefix="n")
    d_novel = budget.delta / 2 if isinstance(budget, EpsDelta) and algo.endswith("gaussian") else budget.delta
    runs = 25                       # 2,500 trials
    trials = runs * REPLICAS
    rate = _novel_release_rate(con, algo, budget, d0, runs)
    bound = d_novel + 4 * math.sqrt(d_novel * (1 - d_novel) / trials)
    assert rate <= bound
    # and the rate is the exact one for this user, so the audit is calibrated, not just passing
    plan = get(algo).plan(budget, Params(d0))[0]
    w = d0 ** -EXPONENT[algo]
    cdf = norm.cdf if plan.noise == "gaussian" else laplace.cdf
    exact = 1 - cdf((plan.threshold - w) / plan.scale) ** d0
    assert abs(rate - exact) < 4 * math.sqrt(exact * (1 - exact) / trials) + 1e-9
    # power: a halved threshold must fail the same audit
    broken = _novel_release_rate(con, algo, budget, d0, 5, broken=True, monkeypatch=monkeypatch)
    assert broken > bound
    assert leftovers(con) == []


def test_seed_reproducible_and_reported(con):
    users, items = random_sets(2000, 1500, 8, 5)
    make_table(con, "t", users, items)
    a = duckdp.select(con, "t", algo="basic", rho=0.1, delta=1e-5, max_contributions=8, seed=7)
    b = duckdp.select(con, "t", algo="basic", rho=0.1, delta=1e-5, max_contributions=8, seed=7)
    c = duckdp.select(con, "t", algo="basic", rho=0.1, delta=1e-5, max_contributions=8, seed=8)
    assert sorted(a.to_arrow().column(0).to_pylist()) == sorted(b.to_arrow().column(0).to_pylist())
    assert sorted(a.to_arrow().column(0).to_pylist()) != sorted(c.to_arrow().column(0).to_pylist())
    assert a.seeded and "SEEDED" in a.report()
    u = duckdp.select(con, "t", algo="basic", rho=0.1, delta=1e-5, max_contributions=8)
    assert not u.seeded and "os.urandom" in u.report()


def test_release_object(con):
    users, items = random_sets(500, 300, 5, 2)
    make_table(con, "t", users, items)
    r = duckdp.select(con, "t", algo="weighted_gaussian", epsilon=1, delta=1e-5, max_contributions=5, seed=1)
    assert r.spent.epsilon == 1 and r.spent.delta == 1e-5 and r.spent.rho is None
    assert len(r.rounds) == 1 and r.rounds[0].released == len(r.to_arrow())
    assert r.items.columns == ["item"]
    z = duckdp.select(con, "t", algo="weighted_gaussian", rho=0.1, delta=1e-5, max_contributions=5, seed=1)
    assert z.spent.rho == 0.1 and z.spent.zcdp_delta == 1e-5 and z.spent.delta > 1e-5
    text = z.report()
    for needle in ("weighted_gaussian", "2.2361", f"{z.rounds[0].threshold:.6g}", "zCDP", "released"):
        assert needle in text
    names = {a["name"] for a in duckdp.algorithms()}
    assert {"weighted_gaussian", "weighted_laplace", "count_gaussian", "count_laplace"} <= names


@pytest.mark.slow
def test_audit_two_thousand_seeded_runs(con):
    """The audit above with one novel user per run, as 2,000 separately seeded releases
    (weighted_gaussian, zCDP at δ = 0.2): frequency ≤ δ within 4 standard errors, and exact."""
    d0, runs, budget = 6, 2000, ZCDP(0.5, 0.2)
    make_table(con, "novel", np.zeros(d0, dtype=np.int64), np.arange(d0), item_prefix="n")
    hits = sum(len(duckdp.select(con, "novel", algo="weighted_gaussian", max_contributions=d0, seed=s,
                                 **budget.as_dict()).to_arrow()) > 0 for s in range(runs))
    rate = hits / runs
    assert rate <= budget.delta + 4 * math.sqrt(budget.delta * (1 - budget.delta) / runs)
    plan = get("weighted_gaussian").plan(budget, Params(d0))[0]
    exact = 1 - norm.cdf((plan.threshold - d0 ** -0.5) / plan.scale) ** d0
    assert abs(rate - exact) < 4 * math.sqrt(exact * (1 - exact) / runs)


@pytest.mark.parametrize("d0", [1, 3, 12])
def test_partitioned_truncation_equals_single_query(con, monkeypatch, d0):
    """Truncation in user-hash passes (large tables) keeps the same keys with the same weights as
    the single query (same salt)."""
    users, items = random_sets(2000, 300, 12, 4)
    make_table(con, "t", users, items)
    ref = sql_weights(con, "t", 0.5, d0, seed=9)
    monkeypatch.setattr(DuckDBStages, "passes_for", lambda self, rows: 4)
    got = sql_weights(con, "t", 0.5, d0, seed=9)
    assert got.keys() == ref.keys()
    assert all(got[k] == pytest.approx(ref[k], rel=1e-12) for k in ref)
    assert leftovers(con) == []


def test_truncation_passes_follow_rows_and_memory_limit(con):
    make_table(con, "t", *random_sets(100, 50, 5, 1))
    con.execute("SET memory_limit = '2GB'")                      # reads back as 1.8 GiB
    ctx = RunContext(con, resolve(con, "t", "user_id", "item", "p"), Randomness(1))
    try:
        assert DuckDBStages(ctx).truncation_passes() == 1         # a small table: one query
        ctx.source.estimated_rows = 100_000_000
        assert DuckDBStages(ctx).truncation_passes() == math.ceil(100_000_000 * 200 / (1.8 * 2**30))
    finally:
        ctx.close()
