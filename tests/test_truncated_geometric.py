"""Truncated geometric partition selection (Desfontaines et al., PETS 2022, Thm 1): π(n) against a
closed form and a linear program, empirical keep rates, a neighbouring-count audit, Δ0 > 1."""
import math

import numpy as np
import pytest
from conftest import leftovers
from scipy.optimize import linprog

import duckdp
from duckdp.mechanisms import get
from duckdp.mechanisms.base import Params
from duckdp.mechanisms.truncated_geometric import keep_probabilities
from duckdp.privacy.budget import EpsDelta

CASES = [(1.0, 1e-5), (0.1, 1e-3), (2.0, 0.05), (0.5, 1e-9)]


def pi_table(eps, delta, n_max):
    """π(0..n_max) from the implementation (π(n) = 1 beyond the returned list)."""
    probs = keep_probabilities(eps, delta)
    out = np.ones(n_max + 1)
    out[0] = 0.0
    m = min(len(probs), n_max)
    out[1:m + 1] = probs[:m]
    return out


def closed_form(eps, delta, n):
    """Solving Thm 1's recurrence in its two linear phases. While π(n−1) ≤ (1−δ)/(1+e^ε) the first
    term is the minimum: π(n) = δ(e^{nε}−1)/(e^ε−1). From n1 on, 1−π(n) = e^{−ε}(1−π(n−1)−δ), so
    π(n) = 1 + c − e^{−(n−n1)ε}(1 − π(n1) + c) with c = δ/(e^ε−1); capped at 1."""
    phase1 = lambda k: delta * math.expm1(k * eps) / math.expm1(eps)
    n1 = 1 + math.floor(math.log1p((1 - delta) / (1 + math.exp(eps)) * math.expm1(eps) / delta) / eps)
    c = delta / math.expm1(eps)
    if n <= n1:
        return min(phase1(n), 1.0)
    return min(1.0, 1 + c - math.exp(-(n - n1) * eps) * (1 - phase1(n1) + c))


def lp_optimum(eps, delta, n_max):
    """The largest keep probabilities that are (ε, δ)-DP between every n−1 and n in both directions,
    for both outcomes (keep, drop), with π(0) = 0: Thm 1 says this optimum is the recurrence."""
    e = math.exp(eps)
    rows, rhs = [], []
    for n in range(1, n_max + 1):
        for a, b in ((n, n - 1), (n - 1, n)):
            r = np.zeros(n_max + 1)
            r[a], r[b] = 1, -e                                   # π(a) ≤ e^ε π(b) + δ
            rows.append(r)
            rhs.append(delta)
            r = np.zeros(n_max + 1)
            r[a], r[b] = -1, e                                   # 1−π(a) ≤ e^ε(1−π(b)) + δ
            rows.append(r)
            rhs.append(delta + e - 1)
    bounds = [(0, 0)] + [(0, 1)] * n_max
    res = linprog(-np.ones(n_max + 1), A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    assert res.success
    return res.x


@pytest.mark.parametrize("eps, delta", CASES)
def test_keep_probabilities_match_closed_form_and_lp_for_n_up_to_50(eps, delta):
    got = pi_table(eps, delta, 50)
    want = np.array([0.0] + [closed_form(eps, delta, n) for n in range(1, 51)])
    assert np.allclose(got, want, rtol=1e-9, atol=1e-15)
    assert np.allclose(got, lp_optimum(eps, delta, 50), rtol=1e-7, atol=1e-9)


def test_recurrence_is_monotone_reaches_one_and_first_values():
    probs = keep_probabilities(1.0, 1e-5)
    assert probs[0] == 1e-5 and probs[1] == pytest.approx(math.e * 1e-5 + 1e-5, rel=1e-15)
    assert np.all(np.diff(probs) > 0) and probs[-1] < 1
    with pytest.raises(duckdp.InvalidParameter):
        keep_probabilities(1e-6, 1e-12)                      # would need millions of steps


def test_plan_splits_the_budget_over_max_contributions():
    (plan,) = get("truncated_geometric").plan(EpsDelta(1.0, 1e-5), Params(10))
    assert (plan.extra.per_key_epsilon, plan.extra.per_key_delta) == (pytest.approx(0.1), pytest.approx(1e-6))
    assert plan.threshold == len(keep_probabilities(0.1, 1e-6)) + 1
    assert plan.scale == pytest.approx(10.0)
    assert "truncated_geometric" in [a["name"] for a in duckdp.algorithms()]


def keyed_table(con, ns, keys_per_n):
    """`keys_per_n` keys held by exactly n users for each n; every user holds one key."""
    con.execute("""CREATE OR REPLACE TABLE t AS
        SELECT k.n::BIGINT * 1000000000 + k.j * 1000 + u.i AS user_id, 'n' || k.n || '_' || k.j AS item
        FROM (SELECT unnest($ns) AS n) nn, LATERAL (SELECT nn.n, j FROM range($m) r(j)) k,
             LATERAL (SELECT i FROM range(k.n) s(i)) u""", {"ns": list(ns), "m": keys_per_n})


def keep_rates(con, eps, delta, d0, ns, seed):
    rel = duckdp.select(con, "t", algo="truncated_geometric", epsilon=eps, delta=delta,
                        max_contributions=d0, seed=seed)
    kept = [int(s.split("_")[0][1:]) for (s,) in rel.items.fetchall()]
    return np.array([kept.count(n) for n in ns])


@pytest.mark.parametrize("d0", [1, 2])
def test_empirical_keep_rate_per_n_within_four_standard_errors(con, d0):
    eps, delta, keys, ns = 1.0, 0.05, 3000, list(range(1, 9))
    keyed_table(con, ns, keys)
    rates = keep_rates(con, eps, delta, d0, ns, seed=d0) / keys
    pi = pi_table(eps / d0, delta / d0, max(ns))[ns]
    se = np.sqrt(pi * (1 - pi) / keys)
    assert np.all(np.abs(rates - pi) <= 4 * se + 1e-12), (rates, pi)
    assert leftovers(con) == []


def test_audit_neighbouring_counts_at_large_delta(con):
    """A key held by n users vs n+1 users is the neighbouring pair for Δ0 = 1 (the added user holds
    only that key). Each key is an independent trial, so many keys per n give the keep rates p_n.
    The DP inequalities must hold within sampling error, and the first-phase steps must be tight
    (p_{n+1} ≈ e^ε p_n + δ): the mechanism spends exactly its budget, no less."""
    eps, delta, keys, ns = 1.0, 0.05, 4000, list(range(0, 7))
    keyed_table(con, ns[1:], keys)
    rates = np.concatenate([[0.0], keep_rates(con, eps, delta, 1, ns[1:], seed=99) / keys])
    se = np.sqrt(rates * (1 - rates) / keys)
    e = math.exp(eps)
    for n in ns[:-1]:
        tol = 4 * math.hypot(se[n + 1], e * se[n])
        assert rates[n + 1] <= e * rates[n] + delta + tol                 # keep event
        assert 1 - rates[n] <= e * (1 - rates[n + 1]) + delta + tol       # drop event
    pi = pi_table(eps, delta, 8)
    tight = [n for n in ns[:-1] if pi[n + 1] == pytest.approx(e * pi[n] + delta)]
    assert tight == [0, 1, 2]
    for n in tight:
        assert abs(rates[n + 1] - (e * rates[n] + delta)) <= 4 * math.hypot(se[n + 1], e * se[n])


def test_reproducible_with_seed_and_refuses_zcdp(con):
    keyed_table(con, [1, 2, 3, 4], 200)
    a = keep_rates(con, 1.0, 0.05, 1, [1, 2, 3, 4], seed=5)
    assert np.array_equal(a, keep_rates(con, 1.0, 0.05, 1, [1, 2, 3, 4], seed=5))
    with pytest.raises(duckdp.InvalidParameter):
        duckdp.select(con, "t", algo="truncated_geometric", rho=0.5, delta=1e-5, max_contributions=1)
    assert leftovers(con) == []
