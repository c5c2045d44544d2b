"""duckdp.explain (data-free users needed for release) and duckdp.evaluate (non-private utility)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from conftest import leftovers
from scipy import stats

import duckdp
from duckdp.errors import InvalidParameter
from duckdp.explain import explain_release


def crossing(prob, target: float, n: int) -> bool:
    """n is the first integer where prob crosses `target`."""
    return prob(n) >= target and (n == 1 or prob(n - 1) < target)


@pytest.mark.parametrize("budget", [{"rho": 0.1}, {"epsilon": 1.0}])
def test_weighted_gaussian_users_are_exact_crossings(budget):
    ex = duckdp.explain("weighted_gaussian", delta=1e-5, max_contributions=100, **budget)
    (r,) = ex.rounds
    assert r.kind == "bound" and [u.keys_per_user for u in r.users] == [1, 2, 5, 10, 20, 50, 100]
    for u in r.users:
        c = 1 / math.sqrt(u.keys_per_user)
        p = lambda n, c=c: stats.norm.sf(r.threshold - n * c, scale=r.scale)   # noqa: E731
        assert u.weight_per_user == pytest.approx(c)
        assert u.users_50 == math.ceil(r.threshold / c)                  # P = 1/2 exactly at N·c = T
        assert crossing(p, 0.5, u.users_50) and crossing(p, 0.95, u.users_95)
    assert ex.overall == r.users


def test_golden_threshold_in_users():
    # Golden values (ε = 1, δ = 1e-5, Δ0 = 100): σ = 3.884141, T = 20.789744 → 21 single-key users for 50 %.
    r = duckdp.explain("basic", epsilon=1, delta=1e-5, keys_per_user=[1, 100]).rounds[0]
    assert r.scale == pytest.approx(3.884141, abs=1e-6) and r.threshold == pytest.approx(20.789744, abs=1e-6)
    assert [u.users_50 for u in r.users] == [21, 208]
    assert r.users[0].users_95 == math.ceil(20.789744 + 3.884141 * stats.norm.ppf(0.95))


def test_laplace_and_count_weighting():
    r = duckdp.explain("weighted_laplace", epsilon=1, delta=1e-5, keys_per_user=[4]).rounds[0]
    u = r.users[0]
    p = lambda n: stats.laplace.sf(r.threshold - n / 4, scale=r.scale)   # noqa: E731
    assert u.weight_per_user == 0.25 and crossing(p, 0.5, u.users_50) and crossing(p, 0.95, u.users_95)
    counts = duckdp.explain("count_gaussian", rho=0.1, delta=1e-5, max_contributions=10).rounds[0].users
    assert len({(u.users_50, u.users_95) for u in counts}) == 1            # a count does not depend on k


def test_dpsips_combines_independent_rounds():
    ex = duckdp.explain("dpsips", rho=0.1, delta=1e-5, keys_per_user=[1, 100])
    assert len(ex.rounds) == 3 and all(r.kind == "bound" for r in ex.rounds)
    for i, u in enumerate(ex.overall):
        k = u.keys_per_user

        def p(n, k=k):
            miss = [stats.norm.cdf(r.threshold - n / math.sqrt(k), scale=r.scale) for r in ex.rounds]
            return 1 - np.prod(miss)

        assert crossing(p, 0.5, u.users_50) and crossing(p, 0.95, u.users_95)
        assert u.users_50 <= min(r.users[i].users_50 for r in ex.rounds)
    assert ex.release_probability([u.users_50 for u in ex.overall], 1)[0] >= 0.5


def test_mad_is_basic_capped_by_phi_b():
    basic = duckdp.explain("weighted_gaussian", rho=0.1, delta=1e-5).rounds[0].users
    mad = duckdp.explain("mad", rho=0.1, delta=1e-5)
    assert mad.rounds[0].kind == "bound" and mad.rounds[0].users == basic     # Φ(3) > 0.95
    low = duckdp.explain("mad", rho=0.1, delta=1e-5, adaptive_excess=1.0).rounds[0]   # Φ(1) ≈ 0.84 < 0.95
    assert [u.users_50 for u in low.users] == [u.users_50 for u in basic]
    assert all(u.users_95 is None for u in low.users)
    two = duckdp.explain("mad2r", rho=0.1, delta=1e-5)
    assert [r.kind for r in two.rounds] == ["bound", "reference"] and two.overall == two.rounds[0].users


def test_policies_are_reference_only():
    pg = duckdp.explain("policy_gaussian", rho=0.1, delta=1e-5)
    assert pg.rounds[0].kind == "reference" and not pg.overall
    assert "cutoff" in str(pg) and "reference, not a bound" in str(pg)
    gw = duckdp.explain("gw", epsilon=1, delta=1e-5)           # explaining needs no allow_unproven
    assert gw.rounds[0].kind == "none" and not gw.rounds[0].users and "caution" in str(gw)
    with pytest.raises(ValueError):
        gw.release_probability(10, 1)


def test_truncated_geometric_uses_keep_probability():
    eps, delta = 1.0, 1e-5
    pi = [0.0]                                   # Desfontaines et al. 2022 Thm 1, written out independently
    while pi[-1] < 1:
        p = pi[-1]
        pi.append(min(math.exp(eps) * p + delta, 1 - math.exp(-eps) * (1 - p - delta), 1.0))
    u = duckdp.explain("truncated_geometric", epsilon=eps, delta=delta, max_contributions=1).rounds[0].users[0]
    assert u.users_50 == next(n for n, p in enumerate(pi) if p >= 0.5)
    assert u.users_95 == next(n for n, p in enumerate(pi) if p >= 0.95)


def test_every_registered_mechanism_explains():
    for algo in duckdp.algorithms():
        budget = {"rho": 0.1} if "rho/delta" in algo["budgets"] else {"epsilon": 1.0}
        ex = duckdp.explain(algo["name"], delta=1e-5, max_contributions=20, **budget)
        assert str(ex).startswith(f"duckdp explain — {algo['name']}") and len(ex.rounds) >= 1
        table = ex.to_arrow()
        assert table.column_names == ["round", "kind", "keys_per_user", "weight_per_user", "users_50", "users_95"]


@pytest.mark.parametrize("kwargs", [
    {"algo": "nope", "rho": 0.1, "delta": 1e-5},
    {"algo": "basic", "rho": 0.1},
    {"algo": "basic", "rho": 0.1, "delta": 1e-5, "keys_per_user": [0]},
    {"algo": "basic", "rho": 0.1, "delta": 1e-5, "max_contributions": 10, "keys_per_user": [11]},
    {"algo": "basic", "rho": 0.1, "delta": 1e-5, "keys_per_user": [1.5]},
    {"algo": "dpsips", "rho": 0.1, "delta": 1e-5, "iterations": 0},
])
def test_bad_input(kwargs):
    with pytest.raises(InvalidParameter):
        duckdp.explain(**kwargs)


def test_report_has_explanation_and_keeps_its_fields(con):
    con.execute("CREATE TABLE t AS SELECT i % 50 AS user_id, i % 7 AS item FROM range(400) r(i)")
    rel = duckdp.select(con, "t", algo="dpsips", rho=0.5, delta=1e-5, max_contributions=10, seed=3)
    report = rel.report()
    head, _, tail = report.partition("\n\n  what a key needs")
    assert head.splitlines()[0] == "duckdp release — dpsips" and "released" in head.splitlines()[-1]
    assert "all 3 rounds together" in tail and "keys/user k" in tail
    pcr = duckdp.count_release(con, "t", rho=0.5, delta=1e-5, seed=1)
    assert "what a key needs" not in pcr.report()      # count release is not a registry mechanism


# -- evaluate ---------------------------------------------------------------------------------------

def hand_table(con):
    """Key 'a' held by 1 user, 'b' by 3, 'c' by 5, 'd' by 12 (with duplicate rows that must not count)."""
    rows = [(0, "a")] + [(u, "b") for u in range(3)] + [(u, "c") for u in range(5)] + \
        [(u, "d") for u in range(12)] + [(0, "d"), (1, "b")]
    con.execute("CREATE TABLE h (user_id BIGINT, item VARCHAR)")
    con.executemany("INSERT INTO h VALUES (?, ?)", rows)
    return "h"


def fake_release(keys: dict) -> SimpleNamespace:
    table = pa.table(keys)
    return SimpleNamespace(to_arrow=lambda: table, key_names=list(keys))


def test_evaluate_hand_made(con):
    ev = duckdp.evaluate(con, hand_table(con), fake_release({"item": ["b", "d", "zz"]}))
    assert (ev.released, ev.released_in_table, ev.items, ev.pairs, ev.captured_pairs) == (3, 2, 4, 21, 15)
    assert ev.captured_mass == pytest.approx(15 / 21)
    rows = {r["bucket"]: r for r in ev.by_frequency.to_pylist()}
    assert (rows["1"]["items"], rows["1"]["released"], rows["1"]["release_rate"]) == (1, 0, 0.0)
    assert (rows["2–4"]["items"], rows["2–4"]["released"], rows["2–4"]["pairs"]) == (1, 1, 3)
    assert (rows["5–9"]["items"], rows["5–9"]["released"]) == (1, 0)
    assert (rows["10–49"]["items"], rows["10–49"]["captured_pairs"], rows["10–49"]["release_rate"]) == (1, 12, 1.0)
    assert rows["≥1000"]["items"] == 0 and rows["≥1000"]["release_rate"] is None
    assert "non-private" in str(ev) and leftovers(con) == []


def test_evaluate_multi_column_and_real_release(con):
    con.execute("CREATE TABLE m AS SELECT i % 301 AS uid, i % 3 AS a, (i % 5)::VARCHAR AS b FROM range(6000) r(i)")
    ev = duckdp.evaluate(con, "m", fake_release({"a": [0, 1], "b": ["0", "9"]}), user_col="uid")
    pairs, captured = con.sql("SELECT count(*), count(*) FILTER (WHERE a = 0 AND b = '0') "
                              "FROM (SELECT DISTINCT uid, a, b FROM m)").fetchall()[0]
    assert (ev.items, ev.released_in_table, ev.pairs, ev.captured_pairs) == (15, 1, pairs, captured)
    rel = duckdp.select(con, "m", algo="basic", rho=1.0, delta=1e-5, user_col="uid", item_col=["a", "b"],
                        max_contributions=15, seed=0)
    ev = duckdp.evaluate(con, "m", rel, user_col="uid")
    assert ev.released == ev.released_in_table == len(rel) and leftovers(con) == []


def test_evaluate_bad_input_leaves_no_objects(con):
    hand_table(con)
    with pytest.raises(InvalidParameter):
        duckdp.evaluate(con, "h", fake_release({"item": ["b"]}), item_col=["item", "user_id"])
    with pytest.raises(duckdp.SchemaError):
        duckdp.evaluate(con, "h", fake_release({"item": ["b"]}), user_col="nope")
    assert leftovers(con) == []


@pytest.mark.parametrize("algo", ["weighted_gaussian", "dpsips", "adaptive_sips", "mad2r"])
def test_explain_shows_the_truncation_order(algo):
    """truncation= as in select(): "global" is named in the header and changes the note on users over Δ0;
    σ, T and the users tables stay (their holders have k ≤ Δ0 keys, untruncated; spec §7)."""
    per_user = duckdp.explain(algo, rho=0.1, delta=1e-6, max_contributions=10)
    assert str(per_user) == str(duckdp.explain(algo, rho=0.1, delta=1e-6, max_contributions=10,
                                               truncation="per_user"))
    assert per_user.truncation == "per_user" and "global" not in str(per_user)
    glob = duckdp.explain(algo, rho=0.1, delta=1e-6, max_contributions=10, truncation="global")
    text = str(glob)
    assert glob.truncation == "global" and "Δ0 = 10, one global key order" in text.splitlines()[0]
    assert any("one secret order of the keys" in n for n in glob.notes)
    assert not any("uniform random Δ0" in n for n in glob.notes)
    assert glob.to_arrow().equals(per_user.to_arrow())
    assert [(r.scale, r.threshold) for r in glob.rounds] == [(r.scale, r.threshold) for r in per_user.rounds]


def test_explain_refuses_a_truncation_that_does_not_apply():
    with pytest.raises(InvalidParameter, match="truncation must be one of 'per_user', 'global'"):
        duckdp.explain("dpsips", rho=0.1, delta=1e-6, truncation="random")
    with pytest.raises(InvalidParameter, match="gw does not bound users to Δ0 keys; truncation='global'"):
        duckdp.explain("gw", epsilon=1.0, delta=1e-6, truncation="global")


def test_release_report_explains_with_the_release_truncation(con):
    """Release.report()'s explanation section follows the release's own truncation order."""
    con.execute("CREATE TABLE t AS SELECT i % 97 AS user_id, i % 31 AS item FROM range(3000) r(i)")
    rel = duckdp.select(con, "t", algo="weighted_gaussian", rho=0.5, delta=1e-6, max_contributions=5, seed=1,
                        truncation="global")
    report = rel.report()
    assert "one secret order of the keys" in report and "uniform random Δ0" not in report
    assert explain_release(rel).truncation == "global"
