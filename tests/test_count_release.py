"""Private Count Release (Rogers 2024): Gumbel noise, threshold and σ golden values, the privacy
filter and its ledger, relative error, the DuckDB entry point, reproducibility and bad input."""
import math
from fractions import Fraction
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
from conftest import leftovers, make_table, random_sets
from scipy import stats
from scipy.special import ndtr

import duckdp
from duckdp.mechanisms.count_release import count_sigma, gumbel_noise, gumbel_threshold, private_count_release
from duckdp.privacy.accountant import spent_of
from duckdp.privacy.budget import ZCDP
from duckdp.rng import Randomness

PAPER = {"initial_epsilon": 5e-4, "delta_per_call": 1e-11, "kbar": 10_000, "relative_error": 0.1}


def zipf_counts(n: int, top: float = 2e5, exponent: float = 1.1) -> np.ndarray:
    return np.floor(top / np.arange(1, n + 1) ** exponent)


def run(counts, rho, delta, seed, kbar=None, **params):
    kbar = kbar or min(len(counts), PAPER["kbar"])
    params = PAPER | {"kbar": kbar} | params
    next_count = counts[kbar] if len(counts) > kbar else 0.0
    return private_count_release(counts[:kbar], next_count, ZCDP(rho, delta), Randomness(seed), **params)


# -- Gumbel noise ------------------------------------------------------------------------------------
def test_gumbel_noise_fits_the_gumbel_cdf_and_rejects_a_wrong_scale():
    draws = np.concatenate([gumbel_noise(Randomness(11), 0, call, np.arange(4000)) for call in range(5)])
    assert stats.kstest(draws, stats.gumbel_r.cdf).pvalue > 1e-3
    for wrong in (0.7, 1.3):                           # power: a 30 % wrong scale must be rejected
        assert stats.kstest(draws, stats.gumbel_r(scale=wrong).cdf).pvalue < 1e-6


def test_gumbel_noise_is_fresh_per_call_and_is_the_prf_noise():
    rng = Randomness(5)
    a, b = gumbel_noise(rng, 0, 0, np.arange(3000)), gumbel_noise(rng, 0, 1, np.arange(3000))
    assert abs(stats.pearsonr(a, b)[0]) < 4 / math.sqrt(3000)
    assert len(np.unique(a)) == a.size
    lo = np.append(np.arange(3000, dtype=np.uint64), np.uint64(2**64 - 1))
    assert np.array_equal(rng.noise("gumbel", 0, np.ones(3001, np.uint64), lo), b)


# -- golden values -----------------------------------------------------------------------------------
def test_unknown_domain_gumbel_threshold_golden():
    # T = 1 + (1/ε)·log(k̄/δ) (Rogers Thm 4) at the paper's ε* = 5e-4, k̄ = 10^4, δ* = 1e-11:
    # 1 + 2000 · 15 · ln 10 = 69078.552789821...
    assert gumbel_threshold(5e-4, 10_000, 1e-11) == pytest.approx(69078.55278982137, rel=1e-10)
    assert gumbel_threshold(1.0, 100, 1e-6) == pytest.approx(1 + 8 * math.log(10), rel=1e-12)


def test_count_sigma_golden_and_kept_above_two_over_epsilon():
    # eq. (2): σ = (r/1.5)(1 + log(k̄/δ*)/ε) = (0.1/1.5) · 69078.5527898... = 4605.2368526...
    assert count_sigma(5e-4, 10_000, 1e-11, 0.1) == pytest.approx(4605.236852654758, rel=1e-10)
    # with r = 0.01 at ε = 1, eq. (2) gives 0.2369 < 2/ε: σ is raised just above 2/ε (Alg. 2)
    sigma = count_sigma(1.0, 10_000, 1e-11, 0.01)
    assert 2.0 < sigma < 2.0 * (1 + 1e-9)


# -- the privacy filter and its ledger ------------------------------------------------------------------
def check_ledger(res, rho, delta, params):
    led = res.ledger.to_pydict()
    gumbel = [i for i, m in enumerate(led["mechanism"]) if m == "gumbel"]
    gauss = [i for i, m in enumerate(led["mechanism"]) if m == "gaussian"]
    for i in gumbel:
        eps = led["epsilon"][i]
        assert led["rho"][i] == eps * eps / 8 and led["delta"][i] == params["delta_per_call"]
        beta = led["scale"][i]                                        # β = 1/ε, rounded up
        assert Fraction(beta) * Fraction(eps) >= 1 and beta <= math.nextafter(1 / eps, math.inf)
        assert led["threshold"][i] == gumbel_threshold(eps, params["kbar"], params["delta_per_call"])
    for i in gauss:
        eps, sigma = led["epsilon"][i], led["scale"][i]
        assert sigma > 2 / eps                                        # σ > 2/ε (Alg. 2)
        assert led["rho"][i] == 0.5 / sigma**2 and led["delta"][i] == 0.0
        assert led["mechanism"][i - 1] == "gumbel" and led["item"][i - 1] == led["item"][i]
    # ε grows by √2 after each ⊥ and stays after a hit
    eps_seq = [(led["epsilon"][i], led["item"][i]) for i in gumbel]
    for (e0, item), (e1, _) in pairwise(eps_seq):
        assert e1 == pytest.approx(e0 * math.sqrt(2) if item is None else e0, rel=1e-15)
    assert eps_seq[0][0] == params["initial_epsilon"]
    # the filter is never exceeded, and it stopped only because the next step would not fit
    assert math.fsum(led["rho"]) <= rho and math.fsum(led["delta"]) <= delta
    assert np.allclose(led["rho_spent"], np.cumsum(led["rho"]), rtol=1e-12)
    last_eps, last_item = eps_seq[-1]
    next_eps = last_eps * math.sqrt(2) if last_item is None else last_eps
    assert (led["rho_spent"][-1] + next_eps**2 / 4 > rho
            or led["delta_spent"][-1] + params["delta_per_call"] > delta)
    # every hit is released once, in order, with its σ
    hits = [led["item"][i] for i in gauss]
    assert hits == list(range(len(res.positions)))
    assert len(set(res.positions.tolist())) == len(res.positions)
    assert np.array_equal(res.sigmas, np.array([led["scale"][i] for i in gauss]))


def test_filter_and_ledger_hold_over_random_runs():
    rng = np.random.default_rng(2024)
    for trial in range(40):
        n = int(rng.integers(0, 400))
        counts = np.sort(rng.zipf(1.6, size=n).astype(float) * rng.integers(1, 50))[::-1]
        rho = float(10 ** rng.uniform(-4, 0.5))
        delta = float(10 ** rng.uniform(-9, -3))
        params = {"initial_epsilon": float(10 ** rng.uniform(-3.5, -1)),
                  "delta_per_call": float(delta / 10 ** rng.uniform(0.5, 5)),
                  "kbar": int(rng.integers(1, 300)),
                  "relative_error": float(10 ** rng.uniform(-2.5, 0))}
        if rho <= params["initial_epsilon"] ** 2 / 4:
            continue
        res = run(counts, rho, delta, trial, **params)
        check_ledger(res, rho, delta, PAPER | params)


def test_gumbel_scale_is_rounded_up_where_float_division_rounds_down():
    # 1/0.0011 rounds to a double below the real quotient: β = 1/ε must step up, never down
    assert Fraction(1 / 0.0011) * Fraction(0.0011) < 1
    res = run(np.array([10.0]), 1e-6, 1e-6, 0, kbar=1, initial_epsilon=0.0011)
    beta = res.ledger.column("scale")[0].as_py()
    assert Fraction(beta) * Fraction(0.0011) >= 1


def test_decisions_depend_on_count_differences_only():
    """Alg. 1 is invariant under adding one constant to every count (scores and c_(k̄+1) move together),
    so the implementation must be too, whatever the counts' size: it compares counts relative to the
    largest (exact integers), never raw c + β·g, which rounds on the largest count's float grid (whole
    units at 2⁵²) and so let the counts' magnitude, not only the data's differences, move the outcomes."""
    counts, shift = zipf_counts(400, top=3000.0), 2**52
    base, moved = run(counts, 2.0, 1e-6, 3, kbar=300), run(counts + shift, 2.0, 1e-6, 3, kbar=300)
    assert base.positions.size > 20
    assert np.array_equal(base.positions, moved.positions)
    assert np.array_equal(base.noisy_counts + shift, moved.noisy_counts)
    assert base.ledger.drop_columns(["step"]).equals(moved.ledger.drop_columns(["step"]))


def test_bottom_handling_and_removal_of_found_items():
    counts = np.array([5000.0, 4000.0, 3000.0])
    res = run(counts, 1.0, 1e-6, 1, kbar=3)
    check_ledger(res, 1.0, 1e-6, PAPER | {"kbar": 3})
    led = res.ledger.to_pydict()
    assert led["item"][0] is None                       # T(ε*) ≈ 46,000 ≫ 5,000: the first call is ⊥
    assert sorted(res.positions.tolist()) == [0, 1, 2]  # all three found, each once
    last = max(i for i, m in enumerate(led["mechanism"]) if m == "gaussian")
    tail = led["item"][last + 1:]
    assert tail and all(i is None for i in tail)        # then only ⊥, ε growing until the filter stops


def test_empty_histogram_only_bottoms_until_the_budget_ends():
    res = run(np.array([]), 0.5, 1e-6, 0, kbar=10)
    check_ledger(res, 0.5, 1e-6, PAPER | {"kbar": 10})
    assert res.positions.size == 0 and set(res.ledger.column("mechanism").to_pylist()) == {"gumbel"}


def test_relative_error_within_target_for_ninety_percent():
    """The paper's claim: ≥ 90 % of released counts within r = 10 %. Noise is independent of the
    selection, so each released count is within r·c with probability 2Φ(r·c/σ) − 1 exactly."""
    counts = zipf_counts(20_000)
    res = run(counts, 1.0, 1e-6, 3)
    true = counts[res.positions]
    within = np.abs(res.noisy_counts - true) <= 0.1 * true
    p = 2 * ndtr(0.1 * true / res.sigmas) - 1
    sd = math.sqrt(np.sum(p * (1 - p))) / len(p)
    print(f"PCR synthetic Zipf, ρ=1: {len(p)} keys, {within.mean():.1%} within 10 % (expected {p.mean():.1%})")
    assert len(p) > 100 and p.mean() >= 0.9
    assert abs(within.mean() - p.mean()) <= 4 * sd
    assert within.mean() >= 0.9


def test_noisy_counts_are_integer_count_plus_gaussian():
    counts = zipf_counts(3000, top=1e6)
    res = run(counts, 1.0, 1e-6, 9)
    assert res.noisy_counts.dtype == np.int64                     # exact integers (discrete Gaussian)
    z = (res.noisy_counts - counts[res.positions]) / res.sigmas   # σ in the thousands: N_Z ≈ N
    assert stats.kstest(z, stats.norm.cdf).pvalue > 1e-3


# -- the DuckDB entry point ----------------------------------------------------------------------------
@pytest.fixture
def table(con):
    users, items = random_sets(3000, 300, 40, 7)
    make_table(con, "t", users, items)
    return users, items


def test_count_release_end_to_end(con, table):
    before = con.sql("SELECT * FROM t ORDER BY ALL").fetchall()
    rel = duckdp.count_release(con, "t", rho=1.0, delta=1e-6, seed=3)
    out = rel.to_arrow()
    assert out.column_names == ["item", "noisy_count", "sigma"]
    assert rel.items.columns == ["item", "noisy_count", "sigma"]
    assert len(rel) == out.num_rows > 0 and rel.seeded and rel.algo == "pcr"
    true = dict(con.sql("SELECT item, count(DISTINCT user_id) FROM t GROUP BY item").fetchall())
    z = [(c - true[k]) / s for k, c, s in zip(*(out.column(n).to_pylist() for n in out.column_names), strict=True)]
    assert max(map(abs, z)) < 6
    assert rel.spent.rho == 1.0 and rel.spent.zcdp_delta == 1e-6 and rel.ledger_rho <= 1.0
    assert rel.spent.epsilon == pytest.approx(spent_of([duckdp.ZCDP(1.0, 1e-6)]).epsilon)
    assert sum(r.released for r in rel.rounds) == out.num_rows
    assert "Gumbel calls" in rel.report() and "none (distinct-user counts" in rel.report()
    assert con.sql("SELECT * FROM t ORDER BY ALL").fetchall() == before
    assert leftovers(con) == []


def test_count_release_is_reproducible_with_seed(con, table):
    a = duckdp.count_release(con, "t", rho=0.5, delta=1e-6, seed=11)
    b = duckdp.count_release(con, "t", rho=0.5, delta=1e-6, seed=11)
    c = duckdp.count_release(con, "t", rho=0.5, delta=1e-6, seed=12)
    assert a.to_arrow().equals(b.to_arrow()) and a.ledger.equals(b.ledger)
    assert not a.to_arrow().equals(c.to_arrow())
    assert not duckdp.count_release(con, "t", rho=0.5, delta=1e-6).seeded


def test_count_release_multi_column_keys_and_relations(con):
    users, items = random_sets(2000, 100, 20, 3)
    tbl = pa.table({"uid": users, "a": items % 7, "b": [f"x{i // 7}" for i in items]})
    rel = duckdp.count_release(con, tbl, rho=0.5, delta=1e-6, user_col="uid", item_col=["a", "b"], seed=1)
    out = rel.to_arrow()
    assert out.column_names == ["a", "b", "noisy_count", "sigma"] and out.num_rows > 0
    assert leftovers(con) == []


@pytest.mark.parametrize("kwargs, error", [
    ({"rho": -1.0, "delta": 1e-6}, duckdp.InvalidParameter),
    ({"rho": 1e-8, "delta": 1e-6}, duckdp.InvalidParameter),               # ρ ≤ ε*²/4
    ({"rho": 1.0, "delta": 1e-11}, duckdp.InvalidParameter),               # δ ≤ δ*
    ({"rho": 1.0, "delta": 1e-6, "kbar": 0}, duckdp.InvalidParameter),
    ({"rho": 1.0, "delta": 1e-6, "kbar": True}, duckdp.InvalidParameter),
    ({"rho": 1.0, "delta": 1e-6, "relative_error": 0}, duckdp.InvalidParameter),
    ({"rho": 1.0, "delta": 1e-6, "initial_epsilon": float("nan")}, duckdp.InvalidParameter),
    ({"rho": 1.0, "delta": 1e-6, "delta_per_call": 1.0}, duckdp.InvalidParameter),
    ({"rho": 1.0, "delta": 1e-6, "user_col": "nope"}, duckdp.SchemaError),
    ({"rho": 1.0, "delta": 1e-6, "item_col": "user_id"}, duckdp.SchemaError),
])
def test_bad_input_is_refused_cleanly(con, kwargs, error):
    make_table(con, "t", np.arange(20) % 7, np.arange(20) % 5)
    before = con.sql("SELECT * FROM t ORDER BY ALL").fetchall()
    with pytest.raises(error):
        duckdp.count_release(con, "t", **kwargs)
    assert con.sql("SELECT * FROM t ORDER BY ALL").fetchall() == before
    assert leftovers(con) == []


def test_nulls_and_colliding_names_are_refused(con):
    con.execute("CREATE TABLE n AS SELECT * FROM (VALUES (1, 'a'), (NULL, 'b')) v(user_id, item)")
    with pytest.raises(duckdp.DataError):
        duckdp.count_release(con, "n", rho=1.0, delta=1e-6)
    con.execute("CREATE TABLE s AS SELECT 1 AS user_id, 'a' AS sigma")
    with pytest.raises(duckdp.SchemaError, match="collides"):
        duckdp.count_release(con, "s", rho=1.0, delta=1e-6, item_col="sigma")
    with pytest.raises(duckdp.InvalidParameter):
        duckdp.count_release("not a connection", "s", rho=1.0, delta=1e-6)
    assert leftovers(con) == []


def test_top_counts_ties_follow_the_key_not_the_row_order(con):
    """Count release's k̄ + 1 largest counts: two keys with equal counts and equal DuckDB hashes (2⁶⁴ + 2 and
    2·2⁶⁴ + 1 as HUGEINT) straddle the cut; which one is read must not follow the order rows arrive in.
    Failed before the key broke ties after the keyed hash (each table kept the key it listed first)."""
    from duckdp.lifecycle import open_run
    from duckdp.mechanisms.count_release.duckdb import top_counts

    con.execute("SET threads = 1")
    a, b = f"{2**64 + 2}::HUGEINT", f"{2 * 2**64 + 1}::HUGEINT"
    read = []
    for first, second in ((a, b), (b, a)):
        con.execute(f"CREATE OR REPLACE TABLE tied AS SELECT range AS user_id, {first} AS item FROM range(5) "
                    f"UNION ALL SELECT range AS user_id, {second} AS item FROM range(5)")
        with open_run(con, "tied", "user_id", "item", Randomness(1)) as stages:
            read.append(top_counts(stages, 1).column(0).to_pylist())
    assert read[0] == read[1] == [2**64 + 2]
