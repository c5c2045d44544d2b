"""keys="threshold"'s draws (duckdp/discrete.py `thresholded_array`): most keys decided by one Bernoulli(P[Z ≥ m])
against rigorous tail digits (duckdp/discrete_tail.py), the rest drawn from Z | Z ≥ m — the law of (Z ≥ m, Z on it)."""
import math

import numpy as np
import pytest
import reference_discrete as ref
from scipy.stats import chisquare

import duckdp
from duckdp import discrete
from duckdp.discrete import DiscreteGaussian, decided_below, discrete_gaussian_array, thresholded_array
from duckdp.discrete_tail import tail_bits, tail_table
from duckdp.prf import PRFKey

SIGMAS = (0.3, 1.0, 3.7, 9.13, 40.123)


def _counters(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**63, n), rng.integers(0, 2**63, n)


@pytest.mark.parametrize("sigma", [*SIGMAS, 1000.0])
def test_tail_digits_bracket_the_exact_tail(sigma):
    """L/2^b < P[Z ≥ m] < (L + 1)/2^b against an independent 600-bit computation (θ₃ normaliser, long direct sum)."""
    ms = sorted({1, 2, max(1, int(sigma)), int(3 * sigma) + 1, int(8 * sigma) + 3})
    for m in ms:
        for bits in (64, 128):
            assert tail_bits(sigma, m, bits) == ref.tail_digits(sigma, m, bits, ms[-1]), (sigma, m, bits)


def test_tail_digit_check_has_power():
    """A σ off by one part in 10¹² moves the 64-bit digits of the tails: the comparison above would catch it."""
    table = tail_table(9.13 * (1 + 1e-12), 30, 64)
    assert any(table[m - 1] != ref.tail_digits(9.13, m, 64) for m in (1, 10, 30))


@pytest.mark.parametrize("sigma", SIGMAS)
def test_thresholded_equals_the_reference_draw_by_draw(sigma):
    """Same bits, same decisions, same draws as the plain version (Fractions, mpmath tails), on floors from below −σ
    to far above: full draws, Bernoulli-only keys, and tail draws."""
    hi, lo = _counters(300, int(sigma * 1000))
    top = int(6 * sigma) + 3
    floors = np.random.default_rng(1).integers(-int(2 * sigma) - 2, top, hi.size)
    key = PRFKey.from_seed(11)
    got = thresholded_array(key, hi, lo, sigma, floors)
    assert np.array_equal(got, ref.thresholded_array(key, hi, lo, sigma, floors))
    assert (got >= floors).any() and (got < floors).any()


def test_later_steps_equal_the_reference(monkeypatch):
    """With 3-bit steps an eighth of the keys tie at each step: the digits of later steps (tail_bits at 6, 9, …
    bits) decide them, as in the plain version; the vectorised first step agrees with the per-key one."""
    monkeypatch.setattr(discrete, "_STEP", 3)
    hi, lo = _counters(400, 5)
    floors = np.random.default_rng(2).integers(1, 12, hi.size)
    key = PRFKey.from_seed(12)
    got = thresholded_array(key, hi, lo, 3.7, floors)
    assert np.array_equal(got, ref.thresholded_array(key, hi, lo, 3.7, floors, step=3))
    assert not np.array_equal(got, ref.thresholded_array(key, hi, lo, 3.7, floors, step=4))     # power


def test_decided_keys_are_below_their_floor():
    hi, lo = _counters(2000, 6)
    floors = np.random.default_rng(3).integers(-3, 40, hi.size)
    key = PRFKey.from_seed(13)
    below = decided_below(key, hi, lo, 9.13, floors)
    got = thresholded_array(key, hi, lo, 9.13, floors)
    assert below.sum() > 1000 and (got[below] == floors[below] - 1).all() and (floors[below] >= 1).all()


def test_each_key_is_settled_alone(monkeypatch):
    """A key's value never depends on the other keys of the call: with the tails summed only up to m = 13 (forced
    here; σ ≳ 8,000 in earnest), keys past it draw in full and the rest use the digits, in one call or one by one."""
    from duckdp import discrete_tail
    monkeypatch.setattr(discrete_tail, "MAX_TERMS", discrete_tail.MAX_TERMS - discrete_tail.largest_tail(3.7, 64) + 13)
    assert discrete_tail.largest_tail(3.7, 64) == 13
    hi, lo = _counters(120, 10)
    floors = np.random.default_rng(11).integers(-5, 30, hi.size)
    key = PRFKey.from_seed(16)
    together = thresholded_array(key, hi, lo, 3.7, floors)
    alone = [thresholded_array(key, hi[i:i + 1], lo[i:i + 1], 3.7, floors[i:i + 1])[0] for i in range(hi.size)]
    assert np.array_equal(together, alone)
    full = discrete_gaussian_array(key, hi, lo, 3.7)
    past = floors > 13
    assert past.any() and np.array_equal(together[past], np.where(full >= floors, full, floors - 1)[past])


def test_large_sigma_draws_every_key_in_full():
    """Where the tails would cost too much to sum (σ ≳ 8,000), every key is one full draw: the same values as
    discrete_gaussian_array's, m − 1 below the floor."""
    hi, lo = _counters(200, 7)
    floors = np.random.default_rng(4).integers(-20000, 60000, hi.size)
    key = PRFKey.from_seed(14)
    full = discrete_gaussian_array(key, hi, lo, 2e4)
    assert not decided_below(key, hi, lo, 2e4, floors).any()
    assert np.array_equal(thresholded_array(key, hi, lo, 2e4, floors), np.where(full >= floors, full, floors - 1))


def _law_pvalues(draws: np.ndarray, m: int, sigma: float) -> tuple[float, float]:
    """(z-score of the pass rate against P[Z ≥ m], chi-square p-value of the passed values against Z | Z ≥ m on
    m … m + 5, the rest pooled)."""
    p = float(ref.tail_probability(sigma, m, 80))
    passed = draws[draws >= m]
    n = draws.size
    z = (passed.size - n * p) / math.sqrt(n * p * (1 - p))
    support = np.arange(m, m + 6)
    w = np.exp(-support.astype(float) ** 2 / (2 * sigma * sigma))
    cells = w / (_norm(sigma) * p)
    expected = np.append(cells, 1 - cells.sum()) * passed.size
    observed = [np.sum(passed == y) for y in support] + [np.sum(passed > support[-1])]
    return z, chisquare(observed, expected).pvalue


def _norm(sigma: float) -> float:
    ys = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41)
    return float(np.exp(-ys.astype(float) ** 2 / (2 * sigma * sigma)).sum())


@pytest.mark.parametrize("step", [64, 2])
def test_thresholded_law(monkeypatch, step):
    """Fixed seeds, 30,000 keys per floor: the pass rate within 4.5 sd of P[Z ≥ m] and the passed values
    distributed as Z | Z ≥ m (p > 10⁻³); with 2-bit steps (a quarter of keys tie at each step) too."""
    monkeypatch.setattr(discrete, "_STEP", step)
    sigma, n = 3.3, 30000
    for m in (1, 3, 6, 9):
        hi, lo = _counters(n, 100 + m)
        draws = thresholded_array(PRFKey.from_seed(20 + m), hi, lo, sigma, np.full(n, m))
        z, pvalue = _law_pvalues(draws, m, sigma)
        assert abs(z) < 4.5 and pvalue > 1e-3, (m, z, pvalue)


def test_law_check_has_power(monkeypatch):
    """A tail draw that skips its acceptance step (the geometric proposal as is) fails the chi-square; pass rates
    from the wrong tail (m + 1's digits) fail the z-score."""
    sigma, n, m = 3.3, 30000, 3
    hi, lo = _counters(n, 103)
    key = PRFKey.from_seed(23)

    def no_accept(self, read, m):
        t = self.t
        return m + discrete._geometric(read, t, 1)

    with monkeypatch.context() as patch:
        patch.setattr(DiscreteGaussian, "draw_at_least", no_accept)
        _, pvalue = _law_pvalues(thresholded_array(key, hi, lo, sigma, np.full(n, m)), m, sigma)
    assert pvalue < 1e-4
    with monkeypatch.context() as patch:
        patch.setattr(discrete, "tail_table", lambda s, top, b: tail_table(s, top + 1, b)[1:])
        patch.setattr(discrete, "tail_bits", lambda s, mm, b: tail_bits(s, mm + 1, b))
        z, _ = _law_pvalues(thresholded_array(key, hi, lo, sigma, np.full(n, m)), m, sigma)
    assert abs(z) > 10


def test_undecided_tails_are_below(monkeypatch):
    """Where p_m's digits cannot be certified (forced here: no working precision allowed), B = 0: such keys never
    pass, whatever the other keys of the call (the canonical per-m sum settles them). Full draws (c ≥ T) take every
    uncertified comparison as U ≥ S(z) too: they land in the lower tail, so no key passes at all."""
    from duckdp import discrete_tail
    tail_table.cache_clear()
    try:
        monkeypatch.setattr(discrete_tail, "_MAX_WORK", 1)
        assert tail_table(3.7, 5, 64) == (None,) * 5
        hi, lo = _counters(500, 8)
        floors = np.random.default_rng(9).integers(-2, 6, hi.size)
        key = PRFKey.from_seed(15)
        got = thresholded_array(key, hi, lo, 3.7, floors)
        assert (got == floors - 1).all()
    finally:
        tail_table.cache_clear()


def _release_z_scores(con, c_values, per_c: int, seed: int) -> tuple[dict, np.ndarray, float, int]:
    """keys="threshold" on keys held by exactly c users each (one key per user: no truncation), `per_c` keys per c:
    the z-score of each c's released fraction against P[Z ≥ T − c], the noise on c = T − 1's released counts, σ, T."""
    con.execute("CREATE OR REPLACE TABLE t AS SELECT concat('u', c, '_', k, '_', i) AS u, concat('k', c, '_', k) AS k "
                "FROM (SELECT unnest(?::BIGINT[]) AS c), range(?) r(k), range(c) s(i)", [list(c_values), per_c])
    agg = duckdp.aggregate(con, "t", by="k", user_col="u", metrics={"n": "users"}, keys="threshold",
                           rho=0.1, delta=1e-6, max_contributions=1, seed=seed)
    sigma, threshold = agg.plan.threshold.sigma, agg.plan.threshold.threshold
    table = agg.to_arrow()
    released = table.column("k").to_pylist()
    noisy = np.array([n for k, n in zip(released, table.column("n").to_pylist(), strict=True)
                      if k.startswith(f"k{threshold - 1}_")])
    scores = {}
    for c in c_values:
        p = float(ref.tail_probability(sigma, threshold - c, 80))
        got = sum(k.startswith(f"k{c}_") for k in released)
        scores[c] = (got - per_c * p) / math.sqrt(per_c * p * (1 - p))
    return scores, noisy - (threshold - 1), sigma, threshold


def test_release_rates_end_to_end(con, monkeypatch):
    """Through duckdp.aggregate: keys with c users (T − 5 … T + 1; σ ≈ 2.24, T = 13 at this budget) are released
    at the rate P[c + Z ≥ T] (within 4.5 sd, fixed seed), and c = T − 1's released counts have Z | Z ≥ 1's mean.
    Power: a rule handed T − 1 is caught."""
    import duckdp.group_by as group_by
    c_values = (8, 9, 10, 11, 12, 13, 14)
    scores, noise, sigma, threshold = _release_z_scores(con, c_values, 1500, seed=31)
    assert threshold == 13 and all(abs(z) < 4.5 for z in scores.values()), (sigma, threshold, scores)
    z = np.arange(1, 60)
    w = np.exp(-z.astype(float) ** 2 / (2 * sigma * sigma)) / np.exp(-z.astype(float) ** 2 / (2 * sigma * sigma)).sum()
    mean, sd = (z * w).sum(), math.sqrt((z * z * w).sum() - (z * w).sum() ** 2)
    assert abs(noise.mean() - mean) < 4.5 * sd / math.sqrt(noise.size)
    real = group_by.Threshold
    monkeypatch.setattr(group_by, "Threshold", lambda s, t, r, tag: real(s, t - 1, r, tag))
    broken, _, _, _ = _release_z_scores(con, c_values, 1500, seed=31)
    assert max(abs(z) for z in broken.values()) > 10
