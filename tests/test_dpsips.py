"""DP-SIPS (Swanberg et al., Alg. 3, Thm 14): budget split, SQL weights vs a numpy reference,
released counts vs a Monte-Carlo run of the reference, and a novel-item privacy audit."""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from conftest import assert_rounds_match_reference, leftovers, make_table, random_sets
from scipy.special import ndtr, ndtri

import duckdp
from duckdp.mechanisms import get
from duckdp.mechanisms.base import Params
from duckdp.mechanisms.dpsips import DPSIPS, round_shares, round_weights
from duckdp.privacy.accountant import spent_of
from duckdp.privacy.budget import ZCDP, EpsDelta, split_exact
from duckdp.privacy.calibration import analytic_gaussian_sigma, gaussian_threshold
from duckdp.rng import Randomness
from duckdp.run import RunContext
from duckdp.source import resolve
from duckdp.stages.duckdb import DuckDBStages

MECH = DPSIPS()
DEFAULT = {"iterations": 3, "ratio": 1 / 3}


# -- numpy reference (Alg. 3 literally) ------------------------------------------------------------
def reference_weights(users, items, removed: set) -> dict:
    """One round's weights with no truncation: Σ over users of 1/√|W_u \\ removed| on W_u \\ removed."""
    sets = defaultdict(set)
    for u, i in zip(users, items, strict=True):
        sets[u].add(i)
    weights = defaultdict(float)
    for s in sets.values():
        rest = s - removed
        for i in rest:
            weights[i] += 1 / math.sqrt(len(rest))
    return dict(weights)


def reference_round_weights(users, items, released, d0, rng, n_items):
    """Weights (and support) of one round: remove `released`, keep a uniform Δ0-subset per user."""
    keep = ~released[items]
    u, it = users[keep], items[keep]
    order = np.lexsort((rng.random(len(u)), u))
    u, it = u[order], it[order]
    rank = np.arange(len(u)) - np.searchsorted(u, u)
    size = np.bincount(u)[u] if len(u) else u
    kept = rank < d0
    w = np.bincount(it[kept], weights=1 / np.sqrt(np.minimum(size[kept], d0)), minlength=n_items)
    return w, np.bincount(it[kept], minlength=n_items) > 0


def reference_dpsips(users, items, plan, d0, rng, n_items) -> list[int]:
    """Alg. 3 on distinct integer (user, item) pairs: newly released count per round."""
    released = np.zeros(n_items, dtype=bool)
    counts = []
    for rp in plan:
        w, support = reference_round_weights(users, items, released, d0, rng, n_items)
        new = support & (w + rng.normal(0.0, rp.scale, n_items) >= rp.threshold)
        released |= new
        counts.append(int(new.sum()))
    return counts


def test_registered():
    assert isinstance(get("dpsips"), DPSIPS)
    assert {"iterations", "ratio"} <= set(next(a for a in duckdp.algorithms() if a["name"] == "dpsips")["params"])


def test_vectorised_reference_matches_literal_reference():
    users, items = random_sets(100, 40, 8, 5)
    removed = np.zeros(40, dtype=bool)
    removed[[0, 3, 7]] = True
    w, support = reference_round_weights(users, items, removed, 8, np.random.default_rng(0), 40)
    ref = reference_weights(users, items, {0, 3, 7})
    assert set(np.flatnonzero(support)) == set(ref)
    assert all(w[i] == pytest.approx(v, rel=1e-12) for i, v in ref.items())


# -- budgets ---------------------------------------------------------------------------------------
def test_shares_golden():
    assert round_shares(3, 1 / 3) == pytest.approx([1 / 13, 3 / 13, 9 / 13], rel=1e-14)
    assert round_shares(4, 1.0) == [0.25] * 4
    assert round_shares(2, 2.0) == pytest.approx([2 / 3, 1 / 3], rel=1e-14)
    assert round_shares(1, 0.2) == [1.0]


def test_zcdp_plan_golden():
    plan = MECH.plan(ZCDP(0.1, 1e-5), Params(100, DEFAULT))
    rhos = [0.1 / 13, 0.3 / 13, 0.9 / 13]
    for rp, rho, sigma in zip(plan, rhos, [8.0622577, 4.6547466, 2.6874192], strict=True):
        assert rp.budget.rho == pytest.approx(rho, rel=1e-14)
        assert rp.budget.delta == pytest.approx(rho * 1e-4, rel=1e-14)
        assert rp.scale == pytest.approx(1 / math.sqrt(2 * rho), rel=1e-11) == pytest.approx(sigma, abs=1e-6)
        # T = max_k 1/√k + σΦ⁻¹((1−δ_i)^{1/k}) (DP-SIPS Alg. 2), evaluated independently here
        k = np.arange(1, 101)
        t = np.max(1 / np.sqrt(k) + rp.scale * ndtri((1 - rp.budget.delta) ** (1 / k)))
        assert rp.threshold == pytest.approx(t, rel=1e-8)
    assert [rp.threshold for rp in plan] == pytest.approx([45.70995, 25.540634, 14.255382], abs=1e-5)


def test_epsdelta_rounds_compose_exactly():
    """(ε, δ): σ_i⁻² = share_i·μ² with μ-GDP calibrated to (ε, δ/2), T_i at δ_i = share_i·δ/2 (Dong, Roth &
    Su 2022 Cor. 3.3; privacy/composition.py); golden values at ε = 1, δ = 1e-5, Δ0 = 100, I = 3, r = 1/3."""
    plan = MECH.plan(EpsDelta(1.0, 1e-5), Params(100, DEFAULT))
    mu = 1 / analytic_gaussian_sigma(1.0, 0.5e-5)
    assert mu == pytest.approx(0.25745719589, abs=1e-11)
    for rp, share in zip(plan, [1 / 13, 3 / 13, 9 / 13], strict=True):
        assert (rp.budget.epsilon, rp.budget.delta) == pytest.approx((share, share * 1e-5), rel=1e-14)
        assert rp.scale == pytest.approx(1 / (mu * math.sqrt(share)), rel=1e-11)
        assert rp.novel_delta == pytest.approx(share * 0.5e-5, rel=1e-14)
        assert rp.threshold == pytest.approx(gaussian_threshold(rp.scale, share * 0.5e-5, 100), rel=1e-12)
    assert [rp.scale for rp in plan] == pytest.approx([14.0044688, 8.0854839, 4.6681563], abs=1e-7)
    assert [rp.threshold for rp in plan] == pytest.approx([80.976727, 45.275158, 25.276094], abs=1e-6)
    assert math.fsum(rp.novel_delta for rp in plan) == 0.5e-5
    assert math.sqrt(sum(1 / rp.scale ** 2 for rp in plan)) <= mu


@pytest.mark.parametrize("budget", [ZCDP(0.1, 1e-5), EpsDelta(1.0, 1e-5), EpsDelta(0.3, 7e-7), ZCDP(2.7, 0.013)])
@pytest.mark.parametrize("iterations, ratio", [(3, 1 / 3), (3, 1.0), (5, 0.5), (4, 2.0), (7, 1.0), (1, 0.3)])
def test_round_budgets_compose_exactly(budget, iterations, ratio):
    rounds = split_exact(budget, round_shares(iterations, ratio))
    amount = "epsilon" if isinstance(budget, EpsDelta) else "rho"
    assert sum(getattr(b, amount) for b in rounds) == getattr(budget, amount)
    assert sum(b.delta for b in rounds) == budget.delta
    spent = spent_of(rounds)
    if isinstance(budget, EpsDelta):
        assert (spent.epsilon, spent.delta) == (budget.epsilon, budget.delta)
    else:
        assert (spent.rho, spent.zcdp_delta) == (budget.rho, budget.delta)
    if ratio == 1.0:
        assert len({getattr(b, amount) for b in rounds[:-1]}) <= 1


@pytest.mark.parametrize("params", [{"iterations": 0}, {"iterations": 2.5}, {"iterations": True},
                                    {"ratio": 0}, {"ratio": -1}, {"ratio": math.inf}, {"ratio": "a"},
                                    {"rounds": 3}, {"iterations": 2000, "ratio": 1e-300}])
def test_bad_params(con, params):
    make_table(con, "t", [0, 1], [0, 1])
    with pytest.raises(duckdp.InvalidParameter):
        duckdp.select(con, "t", algo="dpsips", rho=0.1, delta=1e-5, seed=0, **params)
    assert leftovers(con) == []


# -- SQL path --------------------------------------------------------------------------------------
def _context(con, table="t", item_col="item", seed=0):
    return RunContext(con, resolve(con, table, "user_id", item_col, "t"), Randomness(seed))


def _sql_round_weights(con, removed: list[str], seed: int, d0: int = 12) -> dict:
    """One round's SQL weights over table t after removing `removed` (inserted as released keys)."""
    ctx = _context(con, seed=seed)
    try:
        stages = DuckDBStages(ctx)
        pairs = stages.store(stages.pairs(), "pairs")
        released = stages.empty_keys(pairs)
        if removed:
            con.executemany(f"INSERT INTO {stages.table_name(released)} VALUES (?)", [[k] for k in removed])
        text, params = round_weights(stages, pairs, released, d0)
        return {r[0]: r[1] for r in con.sql(text, params=params).fetchall()}
    finally:
        ctx.close()


def test_sql_round_weights_equal_reference(con):
    for seed in range(3):
        users, items = random_sets(300, 80, 12, seed)
        users, items = np.concatenate([users, users[:50]]), np.concatenate([items, items[:50]])  # duplicates
        make_table(con, "t", users, items)
        names = [f"i{i}" for i in items]
        rng = np.random.default_rng(seed)
        for removed in ([], list(rng.choice(sorted(set(names)), 10, replace=False)), sorted(set(names))[:60]):
            ref = reference_weights(users, names, set(removed))
            got = _sql_round_weights(con, removed, seed)
            assert got.keys() == ref.keys()
            assert all(got[k] == pytest.approx(ref[k], rel=1e-12) for k in ref)
    assert leftovers(con) == []


def test_removal_happens_before_retruncation(con):
    """A user with 30 keys of which 25 are removed keeps all 5 others at weight 1/√5 (Δ0 = 12)."""
    make_table(con, "t", np.zeros(30, dtype=np.int64), np.arange(30))
    got = _sql_round_weights(con, [f"i{i}" for i in range(25)], 1)
    assert got == pytest.approx({f"i{i}": 1 / math.sqrt(5) for i in range(25, 30)}, rel=1e-12)


def test_retruncation_keeps_min_size_after_removal(con):
    """Σ_key w = Σ_u √min(|W_u \\ removed|, Δ0): each user keeps min(remaining, Δ0) keys at 1/√kept."""
    users, items = random_sets(200, 400, 40, 2)
    make_table(con, "t", users, items)
    removed = {f"i{i}" for i in range(0, 400, 3)}
    got = _sql_round_weights(con, sorted(removed), 5, d0=10)
    rest = np.bincount(users, weights=[f"i{i}" not in removed for i in items])
    assert sum(got.values()) == pytest.approx(np.sqrt(np.minimum(rest, 10)).sum(), rel=1e-12)
    assert not removed & got.keys()


@pytest.mark.slow
def test_retruncation_is_uniform_with_a_fresh_salt(con):
    """A user with 20 keys, 4 removed, Δ0 = 5: each remaining key kept with probability 5/16."""
    make_table(con, "t", np.zeros(20, dtype=np.int64), np.arange(20))
    runs, hits = 200, np.zeros(20)
    for seed in range(runs):
        for k in _sql_round_weights(con, ["i0", "i1", "i2", "i3"], seed, d0=5):
            hits[int(k[1:])] += 1
    p = 5 / 16
    assert hits[:4].sum() == 0
    assert np.all(np.abs(hits[4:] / runs - p) < 4.5 * math.sqrt(p * (1 - p) / runs))


# Whole multi-round runs, shared with adaptive SIPS (same rounds, report and cleanup contract).
MULTI_ROUND = [("dpsips", "iterations=3"), ("adaptive_sips", "beta_min=0.5")]


@pytest.mark.parametrize(("algo", "shown"), MULTI_ROUND)
def test_release_rounds_report_and_cleanup(con, algo, shown):
    users, items = random_sets(2000, 300, 20, 3)
    make_table(con, "t", users, items)
    rel = duckdp.select(con, "t", algo=algo, rho=1.0, delta=1e-3, max_contributions=10, seed=4)
    again = duckdp.select(con, "t", algo=algo, rho=1.0, delta=1e-3, max_contributions=10, seed=4)
    keys = rel.to_arrow().column("item").to_pylist()
    assert len(keys) == len(set(keys)) == sum(r.released for r in rel.rounds) == len(rel)
    assert sorted(keys) == sorted(again.to_arrow().column("item").to_pylist())
    assert [r.index for r in rel.rounds] == [0, 1, 2] and all(r.released > 0 for r in rel.rounds)
    mech = get(algo)
    plan = mech.plan(ZCDP(1.0, 1e-3), Params(10, mech.check_params({})))
    assert [(r.sigma, r.threshold, r.budget) for r in rel.rounds] == [(p.scale, p.threshold, p.budget) for p in plan]
    assert (rel.spent.rho, rel.spent.zcdp_delta) == (1.0, 1e-3)
    eps = duckdp.select(con, "t", algo=algo, epsilon=1.0, delta=1e-5, max_contributions=10, seed=4)
    assert (eps.spent.epsilon, eps.spent.delta) == (1.0, 1e-5)
    assert algo in rel.report() and shown in rel.report()
    assert leftovers(con) == []


@pytest.mark.parametrize("algo", [algo for algo, _ in MULTI_ROUND])
def test_multicolumn_keys_odd_names_and_empty_input(con, algo):
    con.execute('CREATE TABLE "we ird" ("user id" INT, "it""em" VARCHAR, "select" INT)')
    con.execute('INSERT INTO "we ird" SELECT u, \'a\' || (i % 3), i % 2 FROM range(400) r(u), range(6) s(i)')
    rel = duckdp.select(con, "we ird", algo=algo, rho=1.0, delta=1e-3, max_contributions=6,
                        user_col="user id", item_col=['it"em', "select"], seed=1, iterations=2, ratio=1)
    assert rel.to_arrow().column_names == ['it"em', "select"] and len(rel) == 6
    con.execute('DELETE FROM "we ird"')
    empty = duckdp.select(con, "we ird", algo=algo, rho=1.0, delta=1e-3, user_col="user id",
                          item_col=['it"em', "select"], seed=1)
    assert len(empty) == 0 and [r.released for r in empty.rounds] == [0, 0, 0]
    assert con.sql('SELECT count(*) FROM "we ird"').fetchall() == [(0,)] and leftovers(con) == []


# -- statistics ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_mean_released_matches_monte_carlo_reference(con):
    """Mean per-round counts over 20 SQL seeds vs 400 reference runs with the same σ_i, T_i, within 4 SE."""
    users, items = random_sets(2000, 3000, 25, 11)
    make_table(con, "t", users, items)
    plan = MECH.plan(ZCDP(1.0, 1e-3), Params(10, DEFAULT))
    rng = np.random.default_rng(2024)
    ref = np.array([reference_dpsips(users, items, plan, 10, rng, 3000) for _ in range(400)], dtype=float)
    assert_rounds_match_reference(con, "dpsips", ref, min_mean=20)


# -- privacy audit: one extra user holding Δ0 keys nobody else has --------------------------------
AUDIT_BUDGET, AUDIT_D0 = ZCDP(0.5, 0.2), 5


def _novel_probability(plan, k):
    """Exact P(some novel key is released): none in rounds < i, so each round sees k keys of weight 1/√k."""
    return 1 - math.prod(ndtr((rp.threshold - 1 / math.sqrt(k)) / rp.scale) ** k for rp in plan)


def _halved(plan):
    return [type(rp)(rp.budget, rp.noise, rp.scale, rp.threshold / 2, rp.extra) for rp in plan]


def _bound(n):
    return AUDIT_BUDGET.delta + 3 * math.sqrt(AUDIT_BUDGET.delta * (1 - AUDIT_BUDGET.delta) / n)


def test_audit_reference_novel_keys_released_at_most_delta():
    plan = MECH.plan(AUDIT_BUDGET, Params(AUDIT_D0, DEFAULT))
    for k in range(1, AUDIT_D0 + 1):
        assert _novel_probability(plan, k) <= AUDIT_BUDGET.delta
    users, items = random_sets(40, 30, 5, 0)
    novel = np.arange(30, 30 + AUDIT_D0)                  # D' = D + a user holding Δ0 novel keys
    users = np.concatenate([users, np.full(AUDIT_D0, 40)])
    items = np.concatenate([items, novel])
    rng = np.random.default_rng(7)
    runs = 2500

    def frequency(p):
        hits = 0
        for _ in range(runs):
            released = np.zeros(30 + AUDIT_D0, dtype=bool)
            for rp in p:
                w, support = reference_round_weights(users, items, released, AUDIT_D0, rng, len(released))
                released |= support & (w + rng.normal(0.0, rp.scale, len(released)) >= rp.threshold)
            hits += released[novel].any()
        return hits / runs

    assert frequency(plan) <= _bound(runs)
    assert frequency(_halved(plan)) > _bound(runs)        # power: a halved threshold is caught


def test_audit_sql_novel_keys_released_at_most_delta(con):
    """SQL path: 1,000 extra users each with Δ0 novel keys (their fates are independent), 3 seeds."""
    users, items = random_sets(300, 50, 5, 1)
    n_novel = 1000
    novel_users = np.repeat(np.arange(1000, 1000 + n_novel), AUDIT_D0)
    novel_items = np.arange(1000, 1000 + n_novel * AUDIT_D0)
    make_table(con, "t", np.concatenate([users, novel_users]), np.concatenate([items, novel_items]))
    params = Params(AUDIT_D0, DEFAULT)
    plan = MECH.plan(AUDIT_BUDGET, params)

    def frequency(p):
        hit = []
        for seed in range(3):
            ctx = _context(con, seed=seed)
            try:
                table, _ = MECH.run(DuckDBStages(ctx), p, params)
            finally:
                ctx.close()
            keys = {int(k[1:]) for k in table.column("item").to_pylist()}
            hit += [any(i in keys for i in range(j, j + AUDIT_D0))
                    for j in range(1000, 1000 + n_novel * AUDIT_D0, AUDIT_D0)]
        return np.mean(hit), len(hit)

    freq, n = frequency(plan)
    assert freq <= _bound(n)
    freq, n = frequency(_halved(plan))
    assert freq > _bound(n)
    assert leftovers(con) == []
