"""max_contributions="auto": the histogram's sensitivity, the budget split, reproducibility, the
report, refusals, and the Session's charge (duckdp/privacy/auto_contributions.py)."""
import math
import shutil
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from conftest import leftovers, make_table, random_sets

import duckdp
from duckdp.cli import main as cli_main
from duckdp.errors import InvalidParameter
from duckdp.lifecycle import open_run
from duckdp.mechanisms import get
from duckdp.mechanisms.base import Params, plan_event
from duckdp.prf import PRFKey
from duckdp.privacy import accounting
from duckdp.privacy import auto_contributions as ac
from duckdp.privacy.accountant import curves, spent_of
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.events import GaussianEvent, _ratio_up
from duckdp.rng import Randomness
from duckdp.stages.duckdb import DuckDBStages


def histogram(con, table: str) -> np.ndarray:
    """The exact bucket counts the engine stage computes (dense, one entry per bucket)."""
    out = np.zeros(len(ac.EDGES), dtype=np.int64)
    with open_run(con, table, "user_id", "item", Randomness(1)) as stages:
        for b, users in stages.contribution_histogram(stages.pairs(), list(ac.EDGES)):
            out[b] = users
    return out


def bucket_of(k: int) -> int:
    return max(b for b, e in enumerate(ac.EDGES) if e <= k)


# sizes at and around every bucket edge, and past the last one
SIZES = [1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 255, 256, 1023, 1024, 4095, 4096, 5000]


def assert_sensitivity_one(con) -> None:
    """Adding one user with k keys (k on every bucket edge) changes exactly one bucket by 1 (the bucket
    of k); removing an existing user changes exactly one bucket by −1."""
    users, items = random_sets(60, 200, 90, seed=3)
    make_table(con, "base", users, items)
    base = histogram(con, "base")
    for k in SIZES:
        con.execute("CREATE OR REPLACE TABLE plus AS SELECT * FROM base UNION ALL "
                    "SELECT 10_000 AS user_id, 'n' || i AS item FROM range($k) r(i)", {"k": k})
        diff = histogram(con, "plus") - base
        expected = np.zeros_like(diff)
        expected[bucket_of(k)] = 1
        assert diff.tolist() == expected.tolist(), f"adding a user with {k} keys changed {diff.tolist()}"
    for u in (0, 7, 31):
        con.execute("CREATE OR REPLACE TABLE minus AS SELECT * FROM base WHERE user_id <> $u", {"u": u})
        diff = histogram(con, "minus") - base
        assert sorted(diff.tolist()) == [-1] + [0] * (len(diff) - 1), f"removing user {u} changed {diff.tolist()}"
    assert base.sum() == 60                                   # every user in exactly one bucket


def test_histogram_sensitivity_one(con):
    assert_sensitivity_one(con)
    assert leftovers(con) == []


def test_sensitivity_test_catches_a_cumulative_histogram(con, monkeypatch):
    """Power: a user counted in every bucket at or below its own (ℓ2 sensitivity up to √7) is caught."""
    def cumulative(self, pairs, edges):
        rows = self.ctx.con.execute(
            f"WITH s AS (SELECT _dp_user, count(*) AS n FROM ({pairs.sql}) GROUP BY _dp_user) "
            "SELECT b, count(*) FROM s, range(len($e)) r(b) WHERE $e[b + 1] <= n GROUP BY b",
            pairs.params | {"e": list(edges)}).fetchall()
        return [(int(b), int(c)) for b, c in rows]

    monkeypatch.setattr(DuckDBStages, "contribution_histogram", cumulative)
    with pytest.raises(AssertionError, match="changed"):
        assert_sensitivity_one(con)


# --- the estimate -----------------------------------------------------------------------------

def test_choose_quantile_interpolation_and_clamps():
    zero = np.zeros(len(ac.EDGES))
    # 100 users in [16, 64): p90 is 90 % into the bucket, geometrically: 16·4^0.9
    counts = np.array([0, 0, 100, 0, 0, 0, 0])
    assert ac.choose(counts, 1.0, zero) == math.ceil(16 * 4 ** 0.9)
    # 90 users in [1, 4), 10 in [256, 1024): p90 is the end of bucket 0
    assert ac.choose(np.array([90, 0, 0, 0, 10, 0, 0]), 1.0, zero) == 4
    assert ac.choose(np.array([10, 0, 0, 0, 0, 0, 90]), 1.0, zero) == ac.CAP        # open bucket → the cap
    assert ac.choose(np.zeros(7), 1.0, -np.ones(7)) == ac.FALLBACK                 # every noisy count ≤ 0
    # every count is soft-thresholded at σ: 3 users in [1024, 4096) at σ = 3 count as none, and the
    # 103 users in [4, 16) as 100, so p90 is 90 % into that bucket
    assert ac.choose(np.array([0, 103, 0, 0, 0, 3, 0]), 3.0, zero) == math.ceil(4 * 4 ** 0.9)
    for _ in range(200):                                   # always an integer in [1, CAP]
        rng = np.random.default_rng(_)
        d = ac.choose(rng.integers(0, 50, 7), float(rng.uniform(0.1, 30)), rng.standard_normal(7))
        assert isinstance(d, int) and 1 <= d <= ac.CAP


def test_denoise_is_a_soft_threshold_at_sigma():
    """max(noisy − σ, 0) per bucket: a real tail bucket near σ shrinks instead of vanishing, so Δ0 moves
    continuously with its count (the old hard cut at σ on the run around the mode jumped a bucket down)."""
    sigma = 39.0
    assert ac.denoise(np.array([-5.0, 10, 284, 223, 60, 39, 0]), sigma).tolist() == [0, 0, 245, 184, 21, 0, 0]
    base = np.array([0.0, 0.0, 284, 223, 0.0, 0.0, 0.0])
    d0 = [ac.choose(base + np.array([0, 0, 0, 0, c, 0, 0]), sigma, np.zeros(7)) for c in (38.0, 40.0, 60.0, 100.0)]
    assert d0[0] == d0[1] - 1 or d0[0] == d0[1]                 # no jump where the count crosses σ
    assert d0 == sorted(d0) and d0[-1] > 256                     # then rises into [256, 1024) as it grows


def test_estimate_noise_has_its_own_key_and_is_reproducible():
    key = PRFKey.from_seed(5)
    z = ac.noise(key, len(ac.EDGES))
    assert np.array_equal(z, ac.noise(PRFKey.from_seed(5), len(ac.EDGES)))
    assert len(set(z.tolist())) == len(ac.EDGES)                       # fresh noise per bucket
    assert not np.array_equal(z, ac.noise(PRFKey.from_seed(6), len(ac.EDGES)))
    from duckdp.prf import noise as round_noise
    first_round = round_noise("gaussian", key, 0, np.zeros(7, np.uint64), np.arange(7, dtype=np.uint64))
    assert not np.any(np.isin(z, first_round))                         # not the mechanism's round-0 draws


# --- the budget split -------------------------------------------------------------------------

def _planner(algo):
    mech = get(algo)
    params = mech.check_params({})
    return lambda b, d: mech.plan(b, Params(d, params))


GRID_ZCDP = [ZCDP(r, d) for r in (0.001, 0.1, 1.0, 30.0) for d in (1e-10, 1e-5, 0.05)]
GRID_EPS = [EpsDelta(e, d) for e in (0.05, 1.0, 3.0, 20.0) for d in (1e-10, 1e-5, 0.05)]
SHARES = (0.001, 0.01, 0.1, ac.MAX_SHARE)


@pytest.mark.parametrize("algo", ["weighted_gaussian", "dpsips", "adaptive_sips", "mad2r", "weighted_laplace"])
def test_split_never_exceeds_the_request(algo):
    mech = get(algo)
    for budget in GRID_ZCDP + GRID_EPS:
        if not isinstance(budget, mech.budgets):
            continue
        for share in SHARES:
            auto, plan = ac.plan(budget, share, _planner(algo))
            charged = [auto.round_plan(), *plan]
            budgets = [p.budget for p in plan] + [auto.budget]
            spent = spent_of(budgets)
            if isinstance(budget, ZCDP):
                assert sum(map(Fraction, (b.rho for b in budgets))) <= Fraction(budget.rho)
                assert sum(map(Fraction, (b.delta for b in budgets))) <= Fraction(budget.delta)
                assert spent.rho <= budget.rho and spent.zcdp_delta <= budget.delta
                assert auto.sigma >= 1 / math.sqrt(2 * auto.budget.rho)          # Bun & Steinke Prop. 1.6
            else:
                assert sum(map(Fraction, (b.epsilon for b in budgets))) <= Fraction(budget.epsilon)
                assert sum(map(Fraction, (b.delta for b in budgets))) <= Fraction(budget.delta)
                assert spent.epsilon <= budget.epsilon and spent.delta <= budget.delta
                events = curves(plan_event(charged))
                assert accounting.composed_delta(events, budget.epsilon) <= budget.delta, (budget, share)
                assert accounting.composed_epsilon(events, budget.delta) <= budget.epsilon
            # the estimate gets about its share, never much more
            if auto.composition == "gdp":
                mus = [e.mu for e in curves(plan_event(charged))]
                assert mus[0] ** 2 / math.fsum(m * m for m in mus) <= share * (1 + 1e-6)


def test_eps_split_is_exact_gaussian_composition():
    """(ε, δ) with a Gaussian mechanism: the estimate costs a μ² share, far less than an ε share."""
    budget = EpsDelta(1.0, 1e-5)
    auto, plan = ac.plan(budget, 0.01, _planner("dpsips"))
    assert auto.composition == "gdp"
    basic_sigma = ac.analytic_gaussian_sigma(0.01, 1e-7)        # what basic composition would need
    assert auto.sigma < basic_sigma / 5
    assert auto.budget.epsilon + auto.mechanism_budget.epsilon == budget.epsilon


# --- the release --------------------------------------------------------------------------------

@pytest.fixture
def data(con):
    users, items = random_sets(400, 300, 40, seed=11)
    make_table(con, "t", users, items)
    return con


@pytest.mark.parametrize("kw", [dict(rho=0.5, delta=1e-5), dict(epsilon=2.0, delta=1e-5)])
@pytest.mark.parametrize("algo", ["dpsips", "adaptive_sips"])
def test_auto_release_reports_delta0_and_cost(data, algo, kw):
    r = duckdp.select(data, "t", algo=algo, max_contributions="auto", seed=3, **kw)
    assert isinstance(r.max_contributions, int) and 1 <= r.max_contributions <= ac.CAP
    assert r.auto.max_contributions == r.max_contributions
    assert r.params["auto_contributions"]["max_contributions"] == r.max_contributions
    text = r.report()
    assert f"Δ0        : {r.max_contributions} keys per user" in text
    assert "chosen privately" in text and "cost" in text
    cost = r.auto.plan.budget
    if "rho" in kw:                              # spent covers the estimate and the mechanism, exactly the request
        assert f"ρ={cost.rho:.4g}" in text
        assert r.spent.rho == kw["rho"] and r.spent.zcdp_delta == kw["delta"]
    else:
        assert f"ε={cost.epsilon:.4g}" in text
        assert r.spent.epsilon == kw["epsilon"] and r.spent.delta == kw["delta"]
    assert leftovers(data) == []


def test_auto_seeded_reproducible(data):
    runs = [duckdp.select(data, "t", algo="dpsips", rho=0.5, delta=1e-5, max_contributions="auto", seed=9)
            for _ in range(2)]
    assert runs[0].max_contributions == runs[1].max_contributions
    assert sorted(runs[0].to_arrow().column(0).to_pylist()) == sorted(runs[1].to_arrow().column(0).to_pylist())
    # the mechanism then runs exactly as with that Δ0 fixed and the remaining budget
    rest = 1 - ac.DEFAULT_SHARE
    fixed = duckdp.select(data, "t", algo="dpsips", rho=0.5 * rest, delta=1e-5 * rest,
                          max_contributions=runs[0].max_contributions, seed=9)
    assert [r.sigma for r in fixed.rounds] == pytest.approx([r.sigma for r in runs[0].rounds], rel=1e-12)
    assert {r.sigma for r in runs[0].rounds} and runs[0].seeded


def test_auto_choice_tracks_the_data(con):
    """Users with ~8 keys give a small Δ0, users with ~300 keys a large one (σ ≈ 3 at ρ = 0.5 · 0.1)."""
    for k, lo, hi in ((8, 4, 16), (300, 256, 1024)):
        con.execute("CREATE OR REPLACE TABLE s AS SELECT u AS user_id, 'k' || i AS item "
                    "FROM range(300) a(u), range($k) b(i)", {"k": k})
        r = duckdp.select(con, "s", algo="weighted_gaussian", rho=0.5, delta=1e-5, max_contributions="auto",
                          auto_share=0.1, seed=1)
        assert lo <= r.max_contributions <= hi


def test_session_charges_the_whole(data):
    s = duckdp.Session(data, rho=1.0, delta=1e-4)
    r = s.select("t", algo="dpsips", rho=0.5, delta=5e-5, max_contributions="auto", seed=2)
    assert s.spent.value == 0.5 and s.spent.delta == 5e-5
    events = s.events
    assert events[0] == GaussianEvent(_ratio_up(1.0, r.auto.plan.sigma), 0.0)
    assert len(events) == 1 + len(r.rounds)
    e = duckdp.Session(data, epsilon=2.0, delta=1e-5)
    e.select("t", algo="adaptive_sips", epsilon=2.0, delta=1e-5, max_contributions="auto", seed=2)
    assert e.spent.value <= 2.0 and e.remaining.value >= 0
    with pytest.raises(duckdp.errors.BudgetExceeded):
        e.select("t", algo="dpsips", epsilon=0.5, delta=1e-6, max_contributions="auto", seed=2)


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_contributions="aut"), "integer >= 1 or 'auto'"),
    (dict(max_contributions="AUTO"), "integer >= 1 or 'auto'"),
    (dict(max_contributions=0), "max_contributions"),
    (dict(max_contributions="auto", auto_share=0), "auto_share"),
    (dict(max_contributions="auto", auto_share=0.5), "auto_share"),
    (dict(max_contributions="auto", auto_share=True), "auto_share"),
    (dict(max_contributions=100, auto_share=0.05), "only with max_contributions='auto'"),
    (dict(max_contributions="auto", algo="count_gaussian"), "noise does not depend on Δ0"),
    (dict(max_contributions="auto", algo="gw", allow_unproven=True), "does not bound users"),
])
def test_bad_values_refused_before_reading_data(kwargs, match):
    con = duckdb.connect()
    kwargs = {"algo": "dpsips", "epsilon": 1.0, "delta": 1e-5} | kwargs
    if kwargs["algo"] == "gw":
        kwargs |= {"epsilon": 1.0}
    with pytest.raises(InvalidParameter, match=match):
        duckdp.select(con, "no_such_table", **kwargs)       # refused before the input is even resolved


def test_cli_accepts_auto(tmp_path, capsys):
    src = tmp_path / "in.parquet"
    users, items = random_sets(200, 100, 30, seed=4)
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"user_id": users, "item": [f"i{i}" for i in items]}), src)
    out = tmp_path / "out.parquet"
    assert cli_main(["select", str(src), "--rho", "0.5", "--delta", "1e-5", "--algo", "dpsips",
                     "--max-contributions", "auto", "-o", str(out), "--seed", "1", "--json"]) == 0
    import json
    summary = json.loads(capsys.readouterr().out)
    assert summary["params"]["auto_contributions"]["max_contributions"] == summary["max_contributions"]
    with pytest.raises(SystemExit) as exc:
        cli_main(["select", str(src), "--rho", "0.5", "--delta", "1e-5", "--max-contributions", "many",
                  "-o", str(tmp_path / "o2.parquet")])
    assert exc.value.code == 2


@pytest.mark.spark
@pytest.mark.skipif(shutil.which("java") is None, reason="no Java runtime on PATH")
def test_spark_histogram_and_auto_match_duckdb(con):
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from duckdp.spark.source import resolve as spark_resolve
    from duckdp.spark.stages import SparkStages
    users, items = random_sets(80, 200, 90, seed=3)
    extra_u = np.repeat(np.arange(1000, 1000 + len(SIZES)), SIZES)
    extra_i = np.concatenate([np.arange(k) for k in SIZES])
    table = pa.table({"user_id": np.concatenate([users, extra_u]),
                      "item": [f"i{i}" for i in np.concatenate([items, extra_i])]})
    make_table(con, "t", table.column(0).to_numpy(), [s[1:] for s in table.column(1).to_pylist()])
    spark = (SparkSession.builder.master("local[2]").appName("duckdp-auto").config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.enabled", "false").getOrCreate())
    df = spark.createDataFrame(table.to_pandas())
    stages = SparkStages(spark, spark_resolve(spark, df, "user_id", "item"), Randomness(1))
    dense = np.zeros(len(ac.EDGES), dtype=np.int64)
    for b, n in stages.contribution_histogram(stages.pairs(), list(ac.EDGES)):
        dense[b] = n
    assert dense.tolist() == histogram(con, "t").tolist()
    on_spark = duckdp.select(spark, df, algo="dpsips", rho=0.5, delta=1e-5, max_contributions="auto", seed=4)
    on_duckdb = duckdp.select(con, "t", algo="dpsips", rho=0.5, delta=1e-5, max_contributions="auto", seed=4)
    assert on_spark.max_contributions == on_duckdb.max_contributions     # same histogram, same PRF noise


# --- an audit of the released Δ0 on a neighbouring pair, with power ---------------------------

def _audit_delta_lo(con, n_trials: int = 20_000) -> tuple[float, float]:
    """(largest Clopper–Pearson lower bound on P[S|D'] − e^ε P[S|D] over events S = {Δ0 ≥ x}, the
    claimed δ(ε)) at ε = 1, for D = 9 users with 2 keys and D' = D + one user with 8 keys.

    The estimate runs as in a release (engine stage → PRF noise under K[b"auto"] → `choose`), with
    σ_a = 1 from ρ_a = ½ (share 0.1 of ρ = 5), which is μ = 1 Gaussian DP (Dong et al. Cor. 2.13 gives
    δ(ε)). D's mode is bucket 0 [1, 4); its p90 moves into bucket 1 [4, 16) when that bucket's
    mass (soft-thresholded at σ_a, `denoise`) is large enough, which the added user makes far likelier:
    the correct histogram stays under the bound (δ_lo ≈ −0.06), one with a larger sensitivity lands far over it.
    """
    from scipy.stats import beta

    auto, _ = ac.plan(ZCDP(5.0, 1e-5), 0.1, _planner("weighted_gaussian"))
    assert auto.sigma == pytest.approx(1.0)
    con.execute("CREATE OR REPLACE TABLE d AS SELECT u AS user_id, 'k' || i AS item FROM range(9) a(u), range(2) b(i)")
    con.execute("CREATE OR REPLACE TABLE d2 AS SELECT * FROM d UNION ALL "
                "SELECT 100 AS user_id, 'n' || i AS item FROM range(8) r(i)")
    h, h2 = histogram(con, "d"), histogram(con, "d2")
    keys = [PRFKey.from_seed(s) for s in range(n_trials)]
    out = np.array([ac.choose(h, auto.sigma, ac.noise(k, len(ac.EDGES))) for k in keys])
    out2 = np.array([ac.choose(h2, auto.sigma, ac.noise(k, len(ac.EDGES))) for k in keys[::-1]])
    eps = 1.0
    claimed = accounting.gdp_delta(1.0 / auto.sigma, eps)
    thresholds = [2, 4, 5, 8, 16, 17, 64, 256, 1024, ac.CAP]
    a = 1e-3 / (2 * len(thresholds))
    best = -1.0
    for x in thresholds:
        for first, second in ((out2, out), (out, out2)):
            x1, x0 = int(np.sum(first >= x)), int(np.sum(second >= x))
            lo1 = 0.0 if x1 == 0 else float(beta.ppf(a, x1, n_trials - x1 + 1))
            hi0 = 1.0 if x0 == n_trials else float(beta.ppf(1 - a, x0 + 1, n_trials - x0))
            best = max(best, lo1 - math.exp(eps) * hi0)
    return best, claimed


@pytest.mark.slow
def test_audit_released_delta0(con, monkeypatch):
    lo, claimed = _audit_delta_lo(con)
    assert lo <= claimed, f"privacy violation shown: δ_lo={lo:.4f} > δ={claimed:.4f}"

    def pair_counts(self, pairs, edges):         # the broken variant: counts a bucket's (user, key) pairs
        rows = self.ctx.con.execute(
            f"WITH s AS (SELECT _dp_user, count(*) AS n FROM ({pairs.sql}) GROUP BY _dp_user) "
            "SELECT len(list_filter($e, lambda e: e <= n)) - 1 AS b, sum(n) FROM s GROUP BY b",
            pairs.params | {"e": list(edges)}).fetchall()
        return [(int(b), int(c)) for b, c in rows]

    monkeypatch.setattr(DuckDBStages, "contribution_histogram", pair_counts)
    broken_lo, _ = _audit_delta_lo(con)
    print(f"\nAUDIT auto Δ0: δ_lo={lo:+.4f} (claimed δ={claimed:.4f}); pair-count histogram δ_lo={broken_lo:+.4f}")
    assert broken_lo > claimed, f"the audit cannot tell the pair-count histogram ({broken_lo:.4f})"
