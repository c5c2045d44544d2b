"""MAD / MAD2R (docs/specs/mad-mad2r.md): SQL weights vs the numpy reference, sensitivity, dominance,
budget composition, novel-item audit and released counts vs the reference's distribution."""
import math

import numpy as np
import pyarrow as pa
import pytest
from conftest import halve_thresholds, leftovers
from reference_mad import basic_weights, mad2r_release, mad_weights, support, user_weights
from scipy.stats import norm

import duckdp
from duckdp.errors import InvalidParameter
from duckdp.mechanisms import get
from duckdp.mechanisms.base import Params, RoundPlan
from duckdp.mechanisms.mad import MadRound, unbiased_vectors
from duckdp.mechanisms.mad import duckdb as mad_duckdb
from duckdp.privacy.accountant import spent_of
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.calibration import gaussian_threshold
from duckdp.privacy.composition import gaussian_rounds
from duckdp.privacy.mad import adaptive_threshold, max_reroute_fraction, reroute_fraction
from duckdp.rng import Randomness
from duckdp.run import RunContext
from duckdp.source import resolve
from duckdp.stages import Query
from duckdp.stages.duckdb import DuckDBStages

EPS = 1e-9


# -- helpers ---------------------------------------------------------------------------------------
def manual_plan(tau, f, min_degree=2, max_degree=10, beta_min=1.0, beta_max=1.0) -> RoundPlan:
    """A plan with chosen τ and f, to exercise truncation on small instances (σ, T unused here)."""
    return RoundPlan(EpsDelta(1, 1e-5), "gaussian", 1.0, 1.0,
                     MadRound(tau=tau, reroute=f, min_degree=min_degree, max_degree=max_degree,
                              beta_min=beta_min, beta_max=beta_max))


def random_sets(rng, n, m, max_size, zipf=0.8) -> list[np.ndarray]:
    p = 1.0 / np.arange(1, m + 1) ** zipf
    p /= p.sum()
    return [rng.choice(m, size=int(rng.integers(1, min(max_size, m) + 1)), replace=False, p=p) for _ in range(n)]


def random_betas(rng, m) -> np.ndarray:
    """Half the items unbiased, the rest in [0.2, 1) (some below β_min, which UserWeights clips)."""
    return np.where(rng.random(m) < 0.5, 1.0, rng.uniform(0.2, 1.0, m))


def to_table(con, name, sets):
    users = np.repeat(np.arange(len(sets)), [len(S) for S in sets])
    items = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
    tbl = pa.table({"user_id": pa.array(users, pa.int64()), "item": pa.array(items, pa.int64())})
    con.register("_mad_src", tbl)
    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _mad_src')
    con.unregister("_mad_src")


def sql_weights(con, sets, m, plan, beta=None, seed=0):
    """SQL-path weights (dense over 0..m−1) and the largest |‖w^u‖ − 1| of the user vectors."""
    to_table(con, "t", sets)
    d0 = max(len(S) for S in sets)
    ctx = RunContext(con, resolve(con, "t", "user_id", "item", "t"), Randomness(seed))
    try:
        stages = DuckDBStages(ctx)
        pairs = stages.store(stages.sized(stages.pairs()), "pairs")
        if beta is None:
            vectors = unbiased_vectors(stages, mad_duckdb, pairs, d0)
        else:
            con.register("_mad_beta", pa.table({"_dp_k0": np.arange(m, dtype=np.int64), "_dp_beta": beta}))
            status = stages.store(Query("SELECT _dp_k0, _dp_beta, true AS _dp_round2 FROM _mad_beta", {}), "status")
            con.unregister("_mad_beta")
            vectors = mad_duckdb.mad2r_vectors(stages, pairs, status, d0, plan.extra.beta_min, plan.extra.beta_max,
                                               stages.randomness.salt())
        bounded = stages.table_name(vectors)
        text, params = mad_duckdb.mad_weights(stages, vectors, plan)
        w = np.zeros(m)
        for item, weight in con.sql(text, params=params).fetchall():
            w[item] = weight
        (norm_err,), = con.sql(f"SELECT max(abs(sqrt(s) - 1)) FROM (SELECT sum(_dp_uw * _dp_uw) AS s "
                               f"FROM {bounded} GROUP BY _dp_user)").fetchall()
    finally:
        ctx.close()
    assert leftovers(con) == []
    return w, norm_err


def ref_weights(sets, m, plan, beta=None, stages=False):
    x = plan.extra
    return mad_weights(sets, m, x.tau, x.reroute, x.min_degree, x.max_degree, beta,
                       x.beta_min, x.beta_max, stages=stages)


# -- parameters and calibration -------------------------------------------------------------------
@pytest.mark.parametrize("max_degree, f", [(3, 0.410684), (10, 0.266228), (50, 0.131421), (100, 0.095000),
                                           (300, 0.056068)])
def test_reroute_fraction_table(max_degree, f):
    """Spec §5 table: f = 1/√Δ_max − 1/(2Δ_max) (unbiased)."""
    assert max_reroute_fraction(1.0, max_degree) == pytest.approx(f, abs=5e-7)


def test_plan_matches_spec_test_vector_and_basic():
    """Spec §2 test vector; Corollary 5.2: the same σ and T as Basic."""
    p = get("mad").plan(EpsDelta(1, 1e-5), Params(100, get("mad").check_params({})))[0]
    assert (p.scale, p.threshold, p.extra.tau) == pytest.approx((3.884141, 20.789744, 32.442166), abs=1e-6)
    basic = get("weighted_gaussian").plan(EpsDelta(1, 1e-5), Params(100))[0]
    assert (p.scale, p.threshold) == (basic.scale, basic.threshold)
    z = get("mad").plan(ZCDP(0.1, 1e-5), Params(100, get("mad").check_params({})))[0]
    zb = get("weighted_gaussian").plan(ZCDP(0.1, 1e-5), Params(100))[0]
    assert (z.scale, z.threshold) == (zb.scale, zb.threshold)
    assert z.extra.reroute == max_reroute_fraction(1.0, 100)


@pytest.mark.parametrize("algo, params, message", [
    ("mad", {"reroute_fraction": 0.2}, "exceeds"),                  # f* = 0.095 at Δ_max = Δ0 = 100
    ("mad", {"adaptive_min_degree": 5, "max_adaptive_degree": 4}, "exceeds"),
    ("mad", {"adaptive_excess": -1}, "adaptive_excess"),
    ("mad", {"adaptive_min_degree": 0}, "adaptive_min_degree"),
    ("mad", {"max_adaptive_degree": 2.5}, "max_adaptive_degree"),
    ("mad2r", {"max_adaptive_degree": 1, "adaptive_min_degree": 1, "beta_min": 1.0}, "1/2"),  # f·β_max = 0.6
    ("mad2r", {"split": 1.0}, "split"),
    ("mad2r", {"beta_min": 0.0}, "beta_min"),
    ("mad2r", {"beta_max": 0.9}, "beta_max"),
    ("mad2r", {"c_lower": float("nan")}, "c_lower"),
    ("mad2r", {"ratio": 0.5}, "does not take"),
])
def test_parameters_refused(con, algo, params, message):
    to_table(con, "t", [np.array([1, 2]), np.array([2])])
    before = con.sql('SELECT * FROM "t" ORDER BY ALL').fetchall()
    with pytest.raises(InvalidParameter, match=message):
        duckdp.select(con, "t", algo=algo, epsilon=1, delta=1e-5, max_contributions=100, **params)
    assert con.sql('SELECT * FROM "t" ORDER BY ALL').fetchall() == before
    assert leftovers(con) == []


def test_smaller_reroute_fraction_allowed_and_guards():
    p = get("mad").plan(EpsDelta(1, 1e-5), Params(100, get("mad").check_params({"reroute_fraction": 0.05})))[0]
    assert p.extra.reroute == 0.05
    assert reroute_fraction(None, 0.5, 1.2, 100) == max_reroute_fraction(0.5, 100) == 0.5 * 0.095
    with pytest.raises(InvalidParameter, match="reroute_fraction"):
        reroute_fraction(-0.01, 1.0, 1.0, 100)
    with pytest.raises(InvalidParameter, match="Lemma 5.4"):            # τ < β_max: novel items truncated
        adaptive_threshold(1.0, 0.05, 3.0, beta_max=1.2)


# -- UserWeights (spec §4, Lemma 5.3) ---------------------------------------------------------------
def test_user_weights_lemma_5_3():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        d = int(rng.integers(1, 40))
        bmin, bmax = rng.uniform(0.2, 1.0), rng.uniform(1.0, 2.0)
        w = user_weights(random_betas(rng, d), bmin, bmax)
        assert abs(np.linalg.norm(w) - 1) < 1e-12
        assert np.all(w >= bmin / np.sqrt(d) * (1 - 1e-12)) and np.all(w <= bmax / np.sqrt(d) * (1 + 1e-12))
    assert np.allclose(user_weights(np.ones(7), 0.5, 1.2), 1 / np.sqrt(7), rtol=1e-15)


# -- SQL == reference ---------------------------------------------------------------------------------
@pytest.mark.parametrize("biased", [False, True])
def test_sql_weights_equal_reference(con, biased):
    rng = np.random.default_rng(1 + biased)
    truncated = 0
    for case in range(6):
        m = 60
        sets = random_sets(rng, 150, m, 12)
        bmin, bmax = (0.5, [1.0, 1.2, 1.3][case % 3]) if biased else (1.0, 1.0)
        max_degree = [3, 5, 12][case % 3]
        plan = manual_plan(tau=float(rng.uniform(1.3, 3)), f=max_reroute_fraction(bmin, max_degree),
                           min_degree=1 + case % 2, max_degree=max_degree, beta_min=bmin, beta_max=bmax)
        beta = random_betas(rng, m) if biased else None
        w_sql, norm_err = sql_weights(con, sets, m, plan, beta, seed=case)
        w_ref, init = ref_weights(sets, m, plan, beta, stages=True)
        np.testing.assert_allclose(w_sql, w_ref, rtol=1e-9, atol=1e-9)
        assert norm_err < 1e-9                                   # Lemma 5.3: ‖w^u‖ = 1 on the SQL path
        truncated += int(np.sum(init > plan.extra.tau))
    assert truncated > 20, "the instances must exercise truncation and rerouting"


# -- sensitivity (Lemma 5.8: ℓ2 ≤ 1; Lemma 5.4: novel ≤ β_max/√k) --------------------------------------
def _check_pair(sets, new, m, plan, beta, weights):
    """ℓ2 change from adding user `new` and the novel items' weight bound; returns the ℓ2 change."""
    before, after = weights(sets, m, plan, beta), weights(sets + [new], m, plan, beta)
    change = float(np.linalg.norm(after - before))
    assert change <= 1 + EPS
    novel = np.setdiff1d(new, np.flatnonzero(support(sets, m)))
    if len(novel):
        assert after[novel].max() <= plan.extra.beta_max / math.sqrt(len(novel)) * (1 + EPS)
    return change


def _random_pair(rng, biased):
    m_shared = int(rng.integers(3, 25))
    sets = random_sets(rng, int(rng.integers(1, 40)), m_shared, 12)
    k_novel = int(rng.integers(0, 6))
    shared = rng.choice(m_shared, size=int(rng.integers(0 if k_novel else 1, min(12, m_shared) + 1)), replace=False)
    new = np.concatenate([shared, m_shared + np.arange(k_novel)]).astype(np.int64)
    m = m_shared + k_novel
    max_degree = int(rng.choice([1, 2, 3, 5, 10]))
    bmin, bmax = (float(rng.choice([0.5, 0.8])), float(rng.choice([1.0, 1.2, 1.3]))) if biased else (1.0, 1.0)
    plan = manual_plan(tau=float(rng.uniform(bmax, 5)), f=max_reroute_fraction(bmin, max_degree),
                       min_degree=int(rng.integers(1, min(2, max_degree) + 1)), max_degree=max_degree,
                       beta_min=bmin, beta_max=bmax)
    return sets, new, m, plan, (random_betas(rng, m) if biased else None)


@pytest.mark.parametrize("biased", [False, True])
@pytest.mark.slow
def test_sensitivity_random_pairs_reference(biased):
    rng = np.random.default_rng(10 + biased)
    worst = max(_check_pair(*_random_pair(rng, biased), ref_weights) for _ in range(1000))
    assert worst > 0.99           # the bound is reached (non-adaptive users, untruncated items)


def _adversarial(max_degree, tau, bmin, bmax, rng):
    """Spec §5.2 families as (sets, new user u, m, β), u of degree d = Δ_max:
    - all-heavy / threshold edge: L copies of u's set, initial weight L/d below, at and far above τ;
    - heavy load: 1–2 of u's items carry the load of many degree-2 users;
    - tight: L = τd − 1 copies of u's set plus, per hit item h, one user holding h and d − 1 private
      items, so h sits exactly at τ and the other items at τ − 1/d. Adding u creates excess only on h
      (E = 1/d per hit item, almost none returned to u) and the copies reroute it along u's own vector;
      this reaches fE + √(1 − cE), the bound of Lemma 5.8."""
    d = max_degree
    u = np.arange(d)
    out = []
    for copies in (1, int(tau * d) - 1, int(tau * d), 3 * int(tau * d) + 1):
        out.append(([u.copy() for _ in range(max(copies, 1))], u, d))
    for load in (int(2 * tau), int(2 * tau) + 1, int(20 * tau)):
        for heavy in (1, 2):
            out.append(([np.array([j % heavy, d + j]) for j in range(load)], u, d + load))
    for hit in range(1, min(2, d) + 1):
        helpers = [np.concatenate([[h], d + h * (d - 1) + np.arange(d - 1)]) for h in range(hit)]
        out.append(([u.copy() for _ in range(int(round(tau * d)) - 1)] + helpers, u, d + hit * (d - 1)))
    beta = (lambda m: np.where(np.arange(m) < 2, bmin / 2, random_betas(rng, m))) if bmax > 1 else (lambda m: None)
    return [(s, n, m, beta(m)) for s, n, m in out]


@pytest.mark.parametrize("biased", [False, True])
@pytest.mark.slow
def test_sensitivity_adversarial_reference(biased):
    rng = np.random.default_rng(3)
    bmin, bmax = (0.5, 1.3) if biased else (1.0, 1.0)
    for max_degree in (2, 3, 5, 10, 30, 100):
        for tau in ((2.0, 8.0) if max_degree <= 10 else (2.0,)):
            plan = manual_plan(tau, max_reroute_fraction(bmin, max_degree), 1, max_degree, bmin, bmax)
            for sets, new, m, beta in _adversarial(max_degree, tau, bmin, bmax, rng):
                _check_pair(sets, new, m, plan, beta, ref_weights)


@pytest.mark.parametrize("max_degree", [10, 30, 100])
def test_sensitivity_check_has_power(max_degree):
    """Spec §5.2 "Tightness": with f = 1.05·f* the tight family exceeds ℓ2 sensitivity 1."""
    plan = manual_plan(8.0, 1.05 * max_reroute_fraction(1.0, max_degree), 1, max_degree)
    sets, new, m, _ = _adversarial(max_degree, 8.0, 1.0, 1.0, None)[-1]
    with pytest.raises(AssertionError):
        _check_pair(sets, new, m, plan, None, ref_weights)


@pytest.mark.parametrize("biased", [False, True])
def test_sensitivity_sql_path(con, biased):
    rng = np.random.default_rng(20 + biased)

    def weights(sets, m, plan, beta):
        return sql_weights(con, sets, m, plan, beta)[0]

    for _ in range(8):
        sets, new, m, plan, beta = _random_pair(rng, biased)
        _check_pair(sets, new, m, plan, beta, weights)
    bmin, bmax = (0.5, 1.3) if biased else (1.0, 1.0)
    plan = manual_plan(2.0, max_reroute_fraction(bmin, 10), 1, 10, bmin, bmax)
    for sets, new, m, beta in _adversarial(10, 2.0, bmin, bmax, rng)[2::3]:
        _check_pair(sets, new, m, plan, beta, weights)


# -- stochastic dominance and the §6.2 example (spec §7) -------------------------------------------------
@pytest.mark.slow
def test_stochastic_dominance_condition(con):
    """Thm 6.1 weights: MAD ≥ Basic where ŵ_i < τ, MAD ≥ τ elsewhere (SQL path and reference)."""
    rng = np.random.default_rng(4)
    checked = 0
    for case in range(200):
        sets = random_sets(rng, int(rng.integers(20, 200)), 40, 10)
        plan = manual_plan(float(rng.uniform(1, 8)), max_reroute_fraction(1.0, 10), 2, 10)
        w, init = ref_weights(sets, 40, plan, stages=True)
        if case < 5:
            w = sql_weights(con, sets, 40, plan)[0]
        below = init < plan.extra.tau
        on = support(sets, 40)
        assert np.all(w[below & on] >= basic_weights(sets, 40)[below & on] - 1e-12)
        assert np.all(w[~below] >= plan.extra.tau - 1e-12)
        checked += int(on.sum())
    assert checked > 5000


def test_mad2r_bias_flag_reads_kept_pairs_only(con):
    """Spec §4: UserWeights reads the biases of the user's set S, the kept pairs. 60 users with 20 keys
    each, only their first key biased, Δ0 = 5: a user is biased iff truncation kept that key (the old
    flag, over every remaining pair, marked all 60)."""
    sets = [np.arange(20 * u, 20 * u + 20) for u in range(60)]
    to_table(con, "t", sets)
    ctx = RunContext(con, resolve(con, "t", "user_id", "item", "t"), Randomness(7))
    try:
        stages = DuckDBStages(ctx)
        pairs = stages.store(stages.sized(stages.pairs()), "pairs")
        beta = np.where(np.arange(1200) % 20 == 0, 0.5, 1.0)
        con.register("_mad_beta", pa.table({"_dp_k0": np.arange(1200, dtype=np.int64), "_dp_beta": beta}))
        status = stages.store(Query("SELECT _dp_k0, _dp_beta, true AS _dp_round2 FROM _mad_beta", {}), "status")
        con.unregister("_mad_beta")
        vectors = stages.table_name(mad_duckdb.mad2r_vectors(stages, pairs, status, 5, 0.5, 1.2,
                                                                  stages.randomness.salt()))
        rows = con.sql(f"SELECT _dp_user, bool_or(_dp_k0 % 20 = 0), bool_and(_dp_biased), bool_or(_dp_biased) "
                       f"FROM {vectors} GROUP BY _dp_user").fetchall()
    finally:
        ctx.close()
    assert len(rows) == 60
    assert all(kept_biased == flag_all == flag_any for _, kept_biased, flag_all, flag_any in rows)
    assert 5 <= sum(r[1] for r in rows) <= 55                       # both kinds of user occur


@pytest.mark.parametrize("max_degree", [3, 100])
def test_section_6_2_identity(con, max_degree):
    """n users of degree 3 = heavy h + 2 light: w^MAD_j = (c_j/√3)(1 + f·ρ_h/3), ρ_h = 1 − 3τ/n."""
    rng = np.random.default_rng(5)
    n, m = 3000, 300
    sets = [np.array([0, *(1 + rng.choice(m, 2, replace=False))]) for _ in range(n)]
    mech = get("mad")
    plan = mech.plan(EpsDelta(1, 1e-5), Params(100, mech.check_params({"max_adaptive_degree": max_degree})))[0]
    w = sql_weights(con, sets, m + 1, plan)[0]
    c = np.bincount(np.concatenate(sets), minlength=m + 1)
    assert c[1:].max() / 3 < plan.extra.tau < n / 3
    rho_h = 1 - 3 * plan.extra.tau / n
    expected = c[1:] / math.sqrt(3) * (1 + plan.extra.reroute * rho_h / 3)
    np.testing.assert_allclose(w[1:], expected, rtol=1e-12)


# -- budget ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [EpsDelta(1, 1e-5), EpsDelta(0.3, 1e-6), ZCDP(0.1, 1e-5), ZCDP(0.7, 3e-7)])
@pytest.mark.parametrize("split", [0.1, 1 / 3, 0.7])
def test_mad2r_budget_composes_exactly(budget, split):
    mech = get("mad2r")
    plans = mech.plan(budget, Params(100, mech.check_params({"split": split})))
    b1, b2 = (p.budget for p in plans)
    spent = spent_of([b1, b2])
    if isinstance(budget, EpsDelta):
        assert (spent.epsilon, spent.delta) == (budget.epsilon, budget.delta)
        assert b1.epsilon == pytest.approx(split * budget.epsilon, rel=1e-15)
    else:
        assert (spent.rho, spent.zcdp_delta) == (budget.rho, budget.delta)
        assert b1.rho == pytest.approx(split * budget.rho, rel=1e-15)
    assert b1.delta == pytest.approx(split * budget.delta, rel=1e-15)
    # σ_j from the exact composition with shares α, 1 − α (privacy/composition.py; zCDP: σ_j = 1/√(2ρ_j));
    # round 2's T with ρ(k) = β_max/√k (Lemma 5.4) exceeds the 1/√k threshold at its δ_2; τ2 = T2 + bσ2
    composed = gaussian_rounds(budget, [split, 1 - split])
    assert [p.scale for p in plans] == composed.sigmas
    assert [p.novel_delta for p in plans] == composed.novel_deltas
    assert plans[1].threshold > gaussian_threshold(plans[1].scale, composed.novel_deltas[1], 100)
    assert plans[0].threshold == gaussian_threshold(plans[0].scale, composed.novel_deltas[0], 100)
    assert plans[1].extra.tau == pytest.approx(plans[1].threshold + 3 * plans[1].scale, rel=1e-15)
    assert plans[1].extra.upper == 3 * plans[0].scale


# -- privacy audit: users whose Δ0 keys nobody else holds -------------------------------------------------
def _novel_rate(con, algo, budget, d0, seeds, params=None):
    """Fraction of (user, run) trials in which a user's private keys are released. Users share no keys,
    and MAD / MAD2R weights, screening and noise are per key, so each user is an independent trial of
    "D' = D + u, u holding Δ0 novel keys" (other users' keys never touch u's)."""
    hits = trials = 0
    for seed in seeds:
        out = duckdp.select(con, "novel", algo=algo, max_contributions=d0, seed=seed, **budget.as_dict(),
                            **(params or {})).to_arrow()
        hits += len(set((np.asarray(out.column("item")) // d0).tolist()))
        trials += N_NOVEL
    return hits / trials


N_NOVEL = 2000


@pytest.mark.parametrize("algo, budget", [("mad", EpsDelta(1.0, 0.2)), ("mad", ZCDP(0.5, 0.1)),
                                          ("mad2r", EpsDelta(1.0, 0.2)), ("mad2r", ZCDP(0.5, 0.2))])
def test_audit_novel_user(con, monkeypatch, algo, budget):
    """On D a user's novel keys never appear, so P[any released | D + u] ≤ δ_novel: δ/2 for (ε, δ), δ for
    zCDP (summed over MAD2R's rounds, Thm 5.1). For MAD it is also the exact rate (ρ(k) = 1/√k at k = Δ0)."""
    d0 = 6
    to_table(con, "novel", [d0 * u + np.arange(d0) for u in range(N_NOVEL)])
    d_novel = budget.delta / 2 if isinstance(budget, EpsDelta) else budget.delta
    seeds = range(3) if isinstance(budget, EpsDelta) else range(10, 13)   # both MAD cases have (T − ρ(Δ0))/σ equal
    trials = N_NOVEL * len(seeds)
    rate = _novel_rate(con, algo, budget, d0, seeds)
    bound = d_novel + 4 * math.sqrt(d_novel * (1 - d_novel) / trials)
    assert rate <= bound
    if algo == "mad":
        plan = get(algo).plan(budget, Params(d0, get(algo).check_params({})))[0]
        exact = 1 - norm.cdf((plan.threshold - d0 ** -0.5) / plan.scale) ** d0
        assert abs(rate - exact) < 4 * math.sqrt(exact * (1 - exact) / trials)
    halve_thresholds(monkeypatch, algo)                                     # power: a broken variant fails
    assert _novel_rate(con, algo, budget, d0, [99]) > d_novel + 4 * math.sqrt(d_novel * (1 - d_novel) / N_NOVEL)
    assert leftovers(con) == []


# -- released counts vs the reference's distribution --------------------------------------------------------
def _instance():
    rng = np.random.default_rng(7)
    return random_sets(rng, 400, 150, 10), 150


def test_mad_released_count_matches_exact_expectation(con):
    sets, m = _instance()
    to_table(con, "t", sets)
    mech = get("mad")
    budget = ZCDP(2.0, 1e-5)
    plan = mech.plan(budget, Params(10, mech.check_params({})))[0]
    w = ref_weights(sets, m, plan)
    p = norm.cdf((w[support(sets, m)] - plan.threshold) / plan.scale)
    var = float(np.sum(p * (1 - p)))
    assert var > 5, "many items must sit near the threshold for the test to have power"
    runs = 40
    counts = np.array([len(duckdp.select(con, "t", algo="mad", max_contributions=10, seed=s, **budget.as_dict()))
                       for s in range(runs)], dtype=float)
    assert abs(counts.mean() - p.sum()) < 4 * math.sqrt(var / runs)


@pytest.mark.slow
def test_mad2r_released_count_matches_reference_monte_carlo(con):
    """Per-round and total counts vs a Monte-Carlo of the reference; c_L = 1 so that round 2 has biased keys."""
    sets, m = _instance()
    to_table(con, "t", sets)
    mech = get("mad2r")
    budget, params = ZCDP(2.0, 1e-5), {"c_lower": 1.0}
    plans = mech.plan(budget, Params(10, mech.check_params(params)))
    rng = np.random.default_rng(8)
    mc = np.array([[mask.sum() for mask in mad2r_release(sets, m, plans, 10, rng)] for _ in range(150)], dtype=float)
    assert mc[:, 2].mean() > 1, "round 2 must see biased keys"
    runs = 40
    got = np.array([[r.released for r in duckdp.select(con, "t", algo="mad2r", max_contributions=10, seed=s,
                                                       **params, **budget.as_dict()).rounds]
                    for s in range(runs)], dtype=float)
    mc = mc[:, :2]
    assert mc[:, 0].var() > 1 and mc[:, 1].var() > 1, "both rounds must release a random number of items"
    for a, b in ((got[:, 0], mc[:, 0]), (got[:, 1], mc[:, 1]), (got.sum(axis=1), mc.sum(axis=1))):
        se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        assert abs(a.mean() - b.mean()) < 4 * se


def test_mad2r_multi_column_keys_and_report(con):
    con.execute("CREATE TABLE mk AS SELECT (i % 97) AS user_id, (i % 7) AS a, (i % 5)::VARCHAR AS b "
                "FROM range(3000) t(i)")
    r = duckdp.select(con, "mk", algo="mad2r", rho=5.0, delta=1e-5, max_contributions=10, user_col="user_id",
                      item_col=["a", "b"], seed=1)
    out = r.to_arrow()
    assert out.column_names == ["a", "b"] and out.num_rows == len(r) > 0
    assert len(r.rounds) == 2 and "mad2r" in r.report()
    assert leftovers(con) == []


@pytest.mark.parametrize("algo", ["mad", "mad2r"])
def test_one_key_per_user_runs_with_defaults(con, algo):
    """Δ0 = 1 < Δ_min: no user is adaptive, so MAD's weights are Basic's and defaults must work."""
    con.execute("CREATE TABLE one AS SELECT range % 50 AS user_id, 'k' || (range % 7) AS item FROM range(500)")
    r = duckdp.select(con, "one", algo=algo, rho=0.5, delta=1e-5, max_contributions=1, seed=1)
    assert len(r) > 0


def test_mad_materialises_only_its_user_vectors(con, monkeypatch):
    """MAD reads its pairs once (the truncation), so the only TEMP table it writes is the user vectors
    its three grouped passes read: no stored copy of the pairs (issue #21 item 1, fewer passes)."""
    to_table(con, "t", random_sets(np.random.default_rng(5), 300, 40, 12))
    stages: list[str] = []
    original = RunContext.temp_table

    def recorded(self, stage):
        stages.append(stage)
        return original(self, stage)

    monkeypatch.setattr(RunContext, "temp_table", recorded)
    duckdp.select(con, "t", algo="mad", rho=0.5, delta=1e-5, max_contributions=5, seed=1)
    assert stages == ["vectors"]
