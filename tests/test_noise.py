"""The PRF generator, injective counters with collision resolution, the noise stage, and the
collision audit of issue #11 (colliding composite keys must get independent noise)."""
import math

import numpy as np
import pyarrow as pa
import pytest
from conftest import leftovers
from scipy.stats import beta as beta_dist
from scipy.stats import gumbel_r, kstest, laplace, norm

import duckdp
from duckdp import noise_stage, prf
from duckdp.counters import INTEGER_COUNTERS, counter_arrays, counter_sql
from duckdp.errors import InvalidParameter
from duckdp.prf import KINDS, PRFKey, _aes, _u64, noise, standard, uniform_from_words
from duckdp.rng import Randomness
from duckdp.run import RunContext
from duckdp.source import resolve
from duckdp.stages.duckdb import DuckDBStages

_M, _MASK = 0xD6E8FEB86659FD93, 2**64 - 1
_M_INV = pow(_M, -1, 2**64)


# -- the generator ---------------------------------------------------------------------------------
def test_aes_known_answer():
    """FIPS-197 Appendix C.1 (AES-128)."""
    key = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
    assert _aes(key, bytes.fromhex("00112233445566778899aabbccddeeff")).hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"


@pytest.mark.parametrize("n", [0, 1, 3, 4097])
def test_words_are_the_first_half_of_each_aes_block(n):
    """`words` (AES into a preallocated buffer) = the first 8 bytes, big-endian, of AES_K(hi ‖ lo)
    block by block: FIPS-197 C.1 as the first counter, then random ones (both signs)."""
    key = PRFKey(bytes.fromhex("000102030405060708090a0b0c0d0e0f"))
    rng = np.random.default_rng(n)
    hi, lo = rng.integers(-2**63, 2**63, n), rng.integers(-2**63, 2**63, n)
    if n:
        hi[0], lo[0] = 0x0011223344556677, np.uint64(0x8899AABBCCDDEEFF).astype(np.int64)
    ref = [int.from_bytes(_aes(key.key, (int(h) % 2**64).to_bytes(8, "big") + (int(v) % 2**64).to_bytes(8, "big"))[:8],
                          "big") for h, v in zip(hi, lo, strict=True)]
    words = key.words(hi, lo)
    assert words.dtype == np.uint64 and words.tolist() == ref
    if n:
        assert f"{int(words[0]):016x}" == "69c4e0d86a7b0430"


@pytest.mark.parametrize("kind", KINDS)
def test_noise_in_steps_is_the_definition(kind):
    """`noise` draws in steps of prf._STEP counters with u and Φ⁻¹(u) in place: the same values as the
    definition standard(kind, uniform_from_words(words of K[nois, t, 0])), across step boundaries."""
    n = 2 * prf._STEP + 3
    rng = np.random.default_rng(7)
    hi, lo = rng.integers(-2**63, 2**63, n), rng.integers(-2**63, 2**63, n)
    key = PRFKey.from_seed(3)
    ref = standard(kind, uniform_from_words(key.derive(b"nois", 2).words(hi, lo)))
    assert np.array_equal(noise(kind, key, 2, hi, lo, threads=1), ref)


def test_noise_is_a_function_of_key_round_and_counter_only():
    key = PRFKey.from_seed(5)
    rng = np.random.default_rng(0)
    hi, lo = rng.integers(-2**63, 2**63, 5000), rng.integers(-2**63, 2**63, 5000)
    ref = noise("gaussian", key, 3, hi, lo)
    perm = rng.permutation(5000)
    assert np.array_equal(noise("gaussian", key, 3, hi[perm], lo[perm]), ref[perm])       # order
    assert np.array_equal(noise("gaussian", key, 3, hi[:17], lo[:17]), ref[:17])          # other rows
    assert np.array_equal(noise("gaussian", key, 3, hi, lo, threads=1), ref)              # threads
    assert np.array_equal(noise("gaussian", PRFKey.from_seed(5), 3, hi, lo), ref)         # same seed
    for other in (noise("gaussian", key, 4, hi, lo), noise("gaussian", PRFKey.from_seed(6), 3, hi, lo)):
        assert abs(np.corrcoef(other, ref)[0, 1]) < 4 / math.sqrt(5000)
    # uint64 and int64 views of the same bits are the same counter
    assert np.array_equal(noise("uniform", key, 0, hi.view(np.uint64), lo.view(np.uint64)),
                          noise("uniform", key, 0, hi, lo))


def test_noise_distributions():
    key = PRFKey.from_seed(3)
    c = np.arange(100_000)
    zeros = np.zeros_like(c)
    assert kstest(noise("gaussian", key, 0, zeros, c), norm.cdf).pvalue > 1e-3
    assert kstest(noise("laplace", key, 0, zeros, c), laplace.cdf).pvalue > 1e-3
    assert kstest(noise("gumbel", key, 0, zeros, c), gumbel_r.cdf).pvalue > 1e-3
    assert kstest(noise("gaussian", key, 0, zeros, c) * 1.05, norm.cdf).pvalue < 1e-3    # power


def test_seeds():
    assert Randomness(7).salt() == Randomness(7).salt() != Randomness(8).salt()
    assert not Randomness().seeded and Randomness(2**100).seeded
    for bad in (1.5, "3", True, -7, 2**127):
        with pytest.raises(InvalidParameter, match="seed"):
            Randomness(bad)
    r = Randomness(1)
    assert len({r.salt() for _ in range(100)}) == 100 and all(0 <= r.salt() < 2**63 for _ in range(10))


# -- the uniform grid (issue #18 §2) ---------------------------------------------------------------
# Sorted words at and around every edge of the 52-bit grid and of the old 53-bit one.
_EXTREME_WORDS = [0, 1, 2**11 - 1, 2**11, 2**12 - 1, 2**12, 2**52, 2**63 - 2**12, 2**63 - 1, 2**63,
                  2**64 - 2**12 - 1, 2**64 - 2**12, 2**64 - 2**11 - 1, 2**64 - 2**11, 2**64 - 2, 2**64 - 1]


def test_uniform_of_extreme_words_is_strictly_inside_symmetric_and_monotone():
    """u ∈ [2⁻⁵³, 1 − 2⁻⁵³] (the old grid gave u = 1.0, hence +∞ noise, for v ≥ 2⁶⁴ − 2¹¹), u(¬v) = 1 − u(v)."""
    v = np.array(_EXTREME_WORDS, dtype=np.uint64)
    u = uniform_from_words(v)
    assert np.all((u > 0) & (u < 1))
    assert u[0] == 2.0**-53 and u[-1] == 1 - 2.0**-53 and u[2] == u[0] and u[-3] == u[-1]
    assert np.array_equal(u + uniform_from_words(~v), np.ones(v.size))        # exactly, not approximately
    assert np.all(np.diff(u) >= 0)
    for kind in KINDS:
        z = standard(kind, u)
        assert np.all(np.isfinite(z)) and np.all(np.diff(z) >= 0), kind
    z = standard("gaussian", u)
    assert z[-1] == -z[0] == pytest.approx(8.2095, abs=1e-4)                  # the grid's largest |noise|/σ
    for kind in ("gaussian", "laplace"):                                       # symmetric tails, to the bit
        assert np.array_equal(standard(kind, uniform_from_words(~v)), -standard(kind, u)), kind


def test_uniform_grid_is_symmetric_on_random_words():
    v = np.random.default_rng(18).integers(0, 2**64, 1_000_000, dtype=np.uint64, endpoint=False)
    u, u_neg = uniform_from_words(v), uniform_from_words(~v)
    assert np.array_equal(u + u_neg, np.ones(v.size)) and np.all((u > 0) & (u < 1))
    assert np.array_equal(u * 2**53 % 2, np.ones(v.size))                     # odd multiples of 2⁻⁵³
    for kind in ("gaussian", "laplace"):
        assert np.array_equal(standard(kind, u_neg), -standard(kind, u)), kind


def test_the_largest_noise_word_gives_finite_noise_and_no_release(con, monkeypatch):
    """Every PRF word 2⁶⁴ − 1: the noise is the grid's largest finite draw (the old +∞ released every
    key, novel ones included). With Δ0 = 10¹⁵ the threshold, σ·Φ⁻¹(1 − δ/(2·10¹⁵)) ≈ 9.3σ, is beyond
    the grid's 8.21σ, so a key of one user is never released, whatever its noise word."""
    top = lambda self, hi, lo: np.full(np.asarray(hi).size, 2**64 - 1, dtype=np.uint64)   # noqa: E731
    monkeypatch.setattr(PRFKey, "words", top)
    key = PRFKey.from_seed(1)
    for kind in KINDS:
        assert np.all(np.isfinite(noise(kind, key, 0, np.zeros(3), np.arange(3)))), kind
    con.execute("CREATE TABLE t AS SELECT i AS user_id, 'k' || i AS item FROM range(20) r(i)")
    _, z = _noised(con, "t", "item")
    assert np.all(z == standard("gaussian", np.array([1 - 2.0**-53])))
    for algo in ("weighted_gaussian", "dpsips", "weighted_laplace"):
        r = duckdp.select(con, "t", algo=algo, epsilon=1.0, delta=1e-5, max_contributions=10**15, seed=1)
        assert r.to_arrow().num_rows == 0, algo


# -- counters and collisions -----------------------------------------------------------------------
def _noised(con, table, item_col, seed=1):
    """(keys, noise) of one weighted_gaussian-style round where every key has weight 0 (seed=None: an
    unseeded release, as in production)."""
    ctx = RunContext(con, resolve(con, table, "user_id", item_col, "n"), Randomness(seed))
    try:
        weights = f"SELECT DISTINCT {ctx.key_select}, 0.0 AS _dp_w FROM {ctx.source.sql}"
        nw = noise_stage.noisy_weights(ctx, weights, {}, "gaussian", 1.0)
        return nw.keys, nw.noisy
    finally:
        ctx.close()


def _collide(con, a: int, b: int, a2: int) -> int:
    """b2 with DuckDB hash(a2, b2) = hash(a, b): hash(x, y) = F(x) XOR murmur64(y), murmur64 inverts."""
    (fa, fa2, mb), = con.sql("SELECT xor(hash($a::BIGINT, 0::BIGINT), hash(0::BIGINT)), "
                             "xor(hash($a2::BIGINT, 0::BIGINT), hash(0::BIGINT)), hash($b::BIGINT)",
                             params={"a": a, "a2": a2, "b": b}).fetchall()
    return _unmurmur(fa ^ fa2 ^ mb)


def test_colliding_composite_keys_get_independent_noise(con):
    assert _collide(con, 42, 1001, 43) == 2676856443368798602
    (same,), = con.sql("SELECT hash(42::BIGINT, 1001::BIGINT) = "
                       "hash(43::BIGINT, 2676856443368798602::BIGINT)").fetchall()
    assert same
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 42, 1001), (2, 43, 2676856443368798602)) v(user_id, a, b)")
    keys, z = _noised(con, "t", ["a", "b"])
    assert keys.num_rows == 2 and z[0] != z[1]
    assert leftovers(con) == []


def test_forced_counter_collisions_get_distinct_ranked_noise(con, monkeypatch):
    """With every key on one counter, keys get ranks 0..n−1 by value and n distinct, reproducible draws."""
    con.execute("CREATE TABLE t AS SELECT i AS user_id, 'k' || i AS item FROM range(300) r(i)")
    honest_keys, honest = _noised(con, "t", "item")
    monkeypatch.setattr(noise_stage, "counter_sql", lambda types: ("0::UBIGINT", "0::UBIGINT", True))
    keys, z = _noised(con, "t", "item")
    assert len(np.unique(z)) == 300
    again_keys, again = _noised(con, "t", "item")        # rows may come back in another order
    assert (dict(zip(again_keys.column("item").to_pylist(), again.tolist(), strict=True))
            == dict(zip(keys.column("item").to_pylist(), z.tolist(), strict=True)))
    ctx_key = Randomness(1).key
    ranks = np.argsort(np.argsort(keys.column("item").to_pylist()))     # rank of each key by value
    zeros = np.zeros(300, np.uint64)
    assert np.array_equal(z, noise("gaussian", ctx_key, 0, zeros, zeros, ranks))
    assert not np.array_equal(np.sort(z), np.sort(honest))


@pytest.mark.parametrize("item", ["i % 97", "'k' || (i % 97)"])
def test_noise_does_not_depend_on_batches(con, monkeypatch, item):
    """The stream's batch size (and so which thread noises a key) changes nothing; no keys, no rows."""
    con.execute(f"CREATE TABLE t AS SELECT i AS user_id, {item} AS item FROM range(500) r(i)")
    keys, z = _noised(con, "t", "item")
    monkeypatch.setattr(noise_stage, "BATCH_ROWS", 7)
    small_keys, small_z = _noised(con, "t", "item")
    ref = dict(zip(keys.column("item").to_pylist(), z, strict=True))
    assert len(ref) == 97 and dict(zip(small_keys.column("item").to_pylist(), small_z, strict=True)) == ref
    con.execute("CREATE TABLE e AS SELECT * FROM t WHERE false")
    none, zn = _noised(con, "e", "item")
    assert none.num_rows == 0 and none.column_names == ["item"] and zn.size == 0
    assert leftovers(con) == []


@pytest.fixture
def fixed_fresh_keys(monkeypatch):
    """Unseeded releases (the production path) with reproducible keys: PRFKey.fresh hands out a fixed
    sequence of keys instead of os.urandom ones (the release still reports itself unseeded)."""
    drawn = iter(range(1, 10**6))
    monkeypatch.setattr(PRFKey, "fresh", classmethod(lambda cls: cls(next(drawn).to_bytes(16, "big"))))


def test_unseeded_string_keys_count_positions(con, monkeypatch, fixed_fresh_keys):
    """Unseeded, non-integer keys are noised at counters (0, position in the round's stream): exactly
    0..n−1 over all batches (so distinct: a batch restarting at 0 would repeat noise), no ranks."""
    con.execute("CREATE TABLE t AS SELECT i AS user_id, 'k' || (i % 97) AS item FROM range(500) r(i)")
    seen = []

    def recording(kind, key, round_tag, hi, lo, ranks=None, threads=None):
        seen.append((np.asarray(hi).copy(), np.asarray(lo).copy(), ranks))
        return noise(kind, key, round_tag, hi, lo, ranks, threads)

    monkeypatch.setattr(noise_stage, "noise", recording)
    monkeypatch.setattr(noise_stage, "BATCH_ROWS", 7)
    keys, z = _noised(con, "t", "item", seed=None)
    hi = np.concatenate([h for h, _, _ in seen])
    lo = np.concatenate([c for _, c, _ in seen])
    assert len(seen) >= 14 and all(r is None for _, _, r in seen)
    assert not hi.any() and sorted(lo.tolist()) == list(range(97))
    assert keys.num_rows == 97 and len(np.unique(z)) == 97
    assert leftovers(con) == []


_NUMPY_INT = {"TINYINT": np.int8, "SMALLINT": np.int16, "INTEGER": np.int32, "BIGINT": np.int64,
              "UTINYINT": np.uint8, "USMALLINT": np.uint16, "UINTEGER": np.uint32, "UBIGINT": np.uint64}


def test_every_numpy_counter_rule_is_checked_against_sql():
    """The parametrisation below covers every integer type whose counters.INTEGER_COUNTERS rule has a
    numpy side, so no rule can gain one untested."""
    assert {t for t, rule in INTEGER_COUNTERS.items() if rule.arrays is not None} == set(_NUMPY_INT)


@pytest.mark.parametrize("kind", list(_NUMPY_INT))
def test_integer_counters_from_the_key_column_are_the_sql_counters(con, kind):
    """The noise stage computes integer keys' counters from the key column it streams
    (counters.counter_arrays) instead of two more SQL columns: the same (hi, lo) as counter_sql, bit for
    bit, at both ends of the type, around 0 and at ±2³¹ where the type has them. Both come from one
    rule (counters.INTEGER_COUNTERS); this checks the rule's two sides agree."""
    info = np.iinfo(_NUMPY_INT[kind])
    values = sorted({v for v in (int(info.min), int(info.min) + 1, -(2**31), -1, 0, 1, 2**31 - 1, 2**31, int(info.max))
                     if info.min <= v <= info.max})
    hi_sql, lo_sql, _ = counter_sql([kind])
    con.execute(f"CREATE TABLE t AS SELECT v::{kind} AS _dp_k0 FROM (SELECT unnest($v::HUGEINT[]) AS v)", {"v": values})
    got = con.sql(f"SELECT _dp_k0, {hi_sql} AS hi, {lo_sql} AS lo FROM t ORDER BY _dp_k0").to_arrow_table()
    hi, lo = counter_arrays([kind])(got.column("_dp_k0").to_numpy())
    assert np.array_equal(_u64(hi), _u64(got.column("hi").to_numpy()))          # the bits noise() reads
    assert np.array_equal(_u64(lo), _u64(got.column("lo").to_numpy()))


def test_integer_keys_stream_no_counter_columns(con):
    """Integer keys' counters are not computed in SQL: the noise scan selects the keys and weights only."""
    con.execute("CREATE TABLE t AS SELECT i AS user_id, i - 5 AS item FROM range(10) r(i)")
    seen = []
    real = RunContext.render

    def render(self, template, idents, params):
        if template == "noise_scan":
            seen.append(idents["counters"])
        return real(self, template, idents, params)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RunContext, "render", render)
        duckdp.select(con, "t", algo="weighted_gaussian", rho=0.1, delta=1e-5, max_contributions=1, seed=1)
    assert seen == [""]


@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "unseeded"])
@pytest.mark.parametrize("kind", ["BIGINT", "INTEGER", "UBIGINT", "HUGEINT", "UHUGEINT", "VARCHAR", "BLOB",
                                  "DATE", "UUID", "INTEGER[]", "STRUCT(a INTEGER, b VARCHAR)", "composite"])
def test_every_key_type_gets_distinct_noise(con, kind, seeded, fixed_fresh_keys):
    values = {
        "BIGINT": "i - 100", "INTEGER": "(i - 100)::INTEGER", "UBIGINT": "(i + 18446744073709551000)::UBIGINT",
        "HUGEINT": "(i - 100)::HUGEINT * 170141183460469231731687303715884105", "UHUGEINT": "i::UHUGEINT << 100",
        "VARCHAR": "repeat('x', i % 7) || (i // 7)", "BLOB": "('\\x00'::BLOB || (i::VARCHAR)::BLOB)",
        "DATE": "DATE '2000-01-01' + i::INTEGER", "UUID": "uuid()", "INTEGER[]": "[i % 10, i // 10]",
        "STRUCT(a INTEGER, b VARCHAR)": "{'a': i % 10, 'b': (i // 10)::VARCHAR}",
    }
    if kind == "composite":
        con.execute("CREATE TABLE t AS SELECT i AS user_id, i % 10 AS a, (i // 10)::VARCHAR AS b FROM range(200) r(i)")
        cols = ["a", "b"]
    else:
        con.execute(f"CREATE TABLE t AS SELECT i AS user_id, ({values[kind]})::{kind} AS item FROM range(200) r(i)")
        cols = "item"
    keys, z = _noised(con, "t", cols, seed=1 if seeded else None)
    assert keys.num_rows == 200 and len(np.unique(z)) == 200


def test_seeded_release_identical_at_one_and_two_threads(con):
    con.execute("CREATE TABLE t AS SELECT i % 5000 AS user_id, 'k' || CASE WHEN i % 2 = 0 THEN (i // 7) % 300 "
                "ELSE (i * 7919) % 5000 END AS item FROM range(40000) r(i)")
    out = {}
    for threads in (1, 2):
        con.execute(f"SET threads = {threads}")
        out[threads] = {algo: sorted(duckdp.select(con, "t", algo=algo, epsilon=1.0, delta=1e-5, max_contributions=4,
                                                   seed=11).to_arrow().column(0).to_pylist())
                        for algo in ("weighted_gaussian", "dpsips", "mad2r")}
    assert out[1] == out[2] and all(len(v) > 0 for v in out[1].values())


# -- the collision audit of issue #11 --------------------------------------------------------------
def _pairs_table(con, name: str, pairs: int, victim: bool) -> None:
    """`pairs` colliding composite-key pairs A_j = (2j, 10⁶+j), B_j = (2j+1, b_j) (equal DuckDB hash),
    each held by 18 users; with `victim` one more user per pair adds A_j (Δ0 = 1)."""
    rows = []
    for j, b2 in enumerate(_collide_many(con, pairs)):
        a, b = (2 * j, 10**6 + j), (2 * j + 1, b2)
        users = 37 * j
        rows += [(users + u, *a) for u in range(18)] + [(users + 18 + u, *b) for u in range(18)]
        if victim:
            rows.append((users + 36, *a))
    users, k0, k1 = zip(*rows, strict=True)
    con.register("_pairs", pa.table({"user_id": users, "k0": k0, "k1": k1}))
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _pairs")
    con.unregister("_pairs")


def _collide_many(con, pairs: int) -> list[int]:
    """b_j with hash(2j+1, b_j) = hash(2j, 10⁶+j) for j < pairs (as `_collide`, in one query)."""
    rows = con.sql("SELECT xor(xor(hash(2 * j, 0::BIGINT), hash(2 * j + 1, 0::BIGINT)), hash(1000000 + j)) "
                   "FROM range($n) r(j) ORDER BY j", params={"n": pairs}).fetchall()
    return [_unmurmur(x) for (x,) in rows]


def _unmurmur(x: int) -> int:
    """The BIGINT y with DuckDB hash(y) = murmur64(y) = x."""
    for _ in range(2):                      # invert x ^= x >> 32; x *= M (twice), then the last xorshift
        x ^= x >> 32
        x = (x * _M_INV) & _MASK
    x ^= x >> 32
    return x - 2**64 if x >= 2**63 else x


def _event_count(con, table: str, algo: str, seeds) -> int:
    """Pairs with "A released and B not", over releases at ε = 1, δ = 1e-5, Δ0 = 1 (a seed of None:
    an unseeded release)."""
    hits = 0
    for seed in seeds:
        out = duckdp.select(con, table, algo=algo, epsilon=1.0, delta=1e-5, max_contributions=1,
                            item_col=["k0", "k1"], seed=seed).to_arrow()
        released = set(zip(out.column("k0").to_pylist(), out.column("k1").to_pylist(), strict=True))
        firsts = {k0 for k0, _ in released}
        hits += sum(1 for k0, k1 in released if k0 % 2 == 0 and k0 + 1 not in firsts)
    return hits


def epsilon_lower_bound(hits1: int, hits0: int, n: int, delta: float, alpha: float = 0.01) -> float:
    """ε_lb = log((p1_low − δ)/p0_high) with one-sided Clopper–Pearson bounds at level α each."""
    p1_low = beta_dist.ppf(alpha, hits1, n - hits1 + 1) if hits1 else 0.0
    p0_high = beta_dist.ppf(1 - alpha, hits0 + 1, n - hits0) if hits0 < n else 1.0
    return math.log(max(p1_low - delta, 1e-300) / p0_high)


@pytest.mark.parametrize("seeds", [(1, 2), (None, None)], ids=["seeded", "unseeded"])
@pytest.mark.parametrize("algo", ["weighted_gaussian", "mad2r"])
def test_collision_audit(con, algo, seeds, monkeypatch, fixed_fresh_keys):
    pairs = 1000
    _pairs_table(con, "d0", pairs, victim=False)
    _pairs_table(con, "d1", pairs, victim=True)
    (collide,), = con.sql("SELECT count(*) FROM d0 x JOIN d0 y ON x.k0 + 1 = y.k0 AND x.k0 % 2 = 0 "
                          "AND hash(x.k0, x.k1) = hash(y.k0, y.k1)").fetchall()
    assert collide == pairs * 18 * 18                                  # every A_j, B_j pair collides
    n = pairs * len(seeds)
    h0, h1 = _event_count(con, "d0", algo, seeds), _event_count(con, "d1", algo, seeds)
    eps_lb = epsilon_lower_bound(h1, h0, n, 1e-5)
    print(f"{algo}: A∧¬B {h0}/{n} without, {h1}/{n} with the victim, ε_lb = {eps_lb:.3f}")
    assert eps_lb <= 1.0
    # power: noise keyed by DuckDB's unkeyed hash of the key (the old counter) must fail the audit (on the
    # key columns: unseeded multi-round runs use key ids, whose colliding hashes the dictionary replaces)
    monkeypatch.setattr(noise_stage, "counter_sql", lambda types: ("0::UBIGINT", "hash(_dp_k0, _dp_k1)", False))
    monkeypatch.setattr(DuckDBStages, "round_pairs", DuckDBStages.pairs)
    b0, b1 = _event_count(con, "d0", algo, seeds), _event_count(con, "d1", algo, seeds)
    assert epsilon_lower_bound(b1, b0, n, 1e-5) > 1.0
    assert leftovers(con) == []
