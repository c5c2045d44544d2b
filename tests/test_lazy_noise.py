"""Adaptive SIPS's lazy noise (duckdp/mechanisms/adaptive_sips/duckdb.py): keys no user kept get their
noise only when a later truncation needs their state, and the release is bit-identical to the eager
path, which noises every key of ∪R_u in every non-final round (docs/specs/adaptive-sips.md, step 4).

Pinned on a table with one heavy user (thousands of keys, Δ0 = 8) among ordinary users: per round, the
multiset of (weight, noisy weight) of the keys with a weight, the last round's weights per key, the
released keys and the per-round counts, seeded, lazy vs eager (`lazy_rounds` patched to None); also
with the candidate limit at 1 (every heavy user through the second pass) and on key ids (string keys,
the unseeded path's counters).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from unittest import mock

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from conftest import leftovers

import duckdp
from duckdp.mechanisms.adaptive_sips import duckdb as own
from duckdp.mechanisms.mad import duckdb as mad
from duckdp.rng import Randomness
from duckdp.run import RunContext
from duckdp.stages import Query
from duckdp.stages.duckdb import DuckDBStages

HEAVY_KEYS = 3000
DELTA0 = 8


@pytest.fixture
def con(con):
    """conftest's connection at one thread: DuckDB's parallel SUM adds floats in a varying order, so at 2
    threads the eager path differs from itself in the last bit of some weights (6 of 24 repeated runs here)."""
    con.execute("SET threads = 1")
    return con


def _table(con: duckdb.DuckDBPyConnection, string_keys: bool, tied: bool = False) -> None:
    """200 ordinary users with 2–12 keys among 0..299 (popular keys first), two heavy users: user −1
    with keys 0..HEAVY_KEYS−1, user −2 with every third of them. `tied`: key i as a HUGEINT whose DuckDB
    hash equals key i ^ 1's ((j + 1)·2⁶⁴ + j + 2 and (j + 2)·2⁶⁴ + j + 1 for j = i // 2: a 128-bit
    integer's hash combines its halves'), so truncation orders tie throughout."""
    rng = np.random.default_rng(5)
    users, items = [], []
    for u in range(200):
        mine = np.unique(np.minimum(rng.zipf(1.3, rng.integers(2, 13)), 300) - 1)
        users += [u] * mine.size
        items += mine.tolist()
    users += [-1] * HEAVY_KEYS + [-2] * (HEAVY_KEYS // 3)
    items += list(range(HEAVY_KEYS)) + list(range(0, HEAVY_KEYS, 3))
    keys = pa.array([f"k{i}" for i in items]) if string_keys else pa.array(items, pa.int64())
    con.register("_src", pa.table({"user_id": pa.array(users, pa.int64()), "item": keys}))
    item = ("CASE WHEN item % 2 = 0 THEN (item // 2 + 1)::HUGEINT * 18446744073709551616 + item // 2 + 2 "
            "ELSE (item // 2 + 2)::HUGEINT * 18446744073709551616 + item // 2 + 1 END AS item") if tied else "item"
    con.execute(f"CREATE OR REPLACE TABLE t AS SELECT user_id, {item} FROM _src")
    con.unregister("_src")


def _trace(con: duckdb.DuckDBPyConnection, lazy: bool, seed: int, rho: float, truncation: str = "per_user") -> dict:
    """One adaptive SIPS release and what it computed: per non-final round the sorted (w, ŵ) of the
    keys with a weight and how many keys the round noised, the last round's weights by key, the keys
    and the per-round counts."""
    rounds: list[list[tuple[float, float]]] = []
    noised: list[int] = []
    last: list[tuple] = []
    original_decide, original_release = DuckDBStages.decide_into, DuckDBStages.release

    def decide_into(self, weights, plan, rule, read, round_tag=None):      # adaptive SIPS's rounds decide here
        pairs: list[tuple[float, float]] = []
        rounds.append(pairs)
        noised.append(0)

        def spy(w, noisy):
            pairs.extend(zip(w[~np.isnan(w)].tolist(), noisy[~np.isnan(w)].tolist(), strict=True))
            noised[-1] += w.size
            return rule(w, noisy)
        return original_decide(self, weights, plan, spy, read, round_tag=round_tag)

    def release(self, weights, plan):
        last.extend(sorted(self.ctx.con.sql(weights.sql, params=weights.params).fetchall()))
        return original_release(self, weights, plan)

    patches = [mock.patch.object(DuckDBStages, "decide_into", decide_into),
               mock.patch.object(DuckDBStages, "release", release)]
    if not lazy:
        patches.append(mock.patch.object(own, "lazy_rounds", lambda engine, params, salts: None))
    for p in patches:
        p.start()
    try:
        out = duckdp.select(con, "t", algo="adaptive_sips", rho=rho, delta=1e-5, max_contributions=DELTA0,
                            seed=seed, truncation=truncation)
    finally:
        for p in patches:
            p.stop()
    return {"rounds": [sorted(r) for r in rounds], "noised": noised, "last": last,
            "keys": out.to_arrow().column("item").to_pylist(), "released": [r.released for r in out.rounds]}


def _same(eager: dict, lazy: dict) -> None:
    """Everything but the number of keys noised is identical, bit for bit; lazy noises far fewer."""
    assert len(lazy["rounds"]) == len(eager["rounds"]) == 2
    for got, want in zip(lazy["rounds"], eager["rounds"], strict=True):
        assert got == want                                    # floats compared exactly
    assert lazy["last"] == eager["last"] and lazy["last"]
    assert lazy["keys"] == eager["keys"] and lazy["keys"]
    assert lazy["released"] == eager["released"]
    assert eager["noised"][0] >= HEAVY_KEYS > 2 * lazy["noised"][0]          # the heavy user's keys wait


@pytest.mark.parametrize("seed,rho", [(1, 1.0), (2, 4.0), (3, 0.3)])
def test_lazy_release_is_bit_identical_to_eager(con, seed, rho):
    _table(con, string_keys=False)
    _same(_trace(con, False, seed, rho), _trace(con, True, seed, rho))
    assert leftovers(con) == []


def test_lazy_under_global_truncation(con):
    """truncation="global" orders every user's keys by the key alone: the candidates follow that order
    (they followed the per-user one before, and the release differed from the eager one)."""
    _table(con, string_keys=False)
    _same(_trace(con, False, 1, 1.0, "global"), _trace(con, True, 1, 1.0, "global"))


def test_second_pass_for_users_cut_short(con, monkeypatch):
    """Candidate limit 1: every user with open pairs is cut short and goes through the second pass."""
    _table(con, string_keys=False)
    eager = _trace(con, False, 4, 1.0)
    passes = []
    original = own.noise_late
    monkeypatch.setattr(own, "candidate_limit", lambda *args: 1)
    monkeypatch.setattr(own, "noise_late", lambda *args: passes.append(1) or original(*args))
    _same(eager, _trace(con, True, 4, 1.0))
    # round 2: the first pass and the second (every key of the heavy users); round 3: none left to noise
    assert len(passes) == 3


def test_first_pair_is_always_a_candidate(con, monkeypatch):
    """Candidate limit 0: the order threshold keeps no pair, so each user's candidates are their first
    pair alone (a user with none would be missed: its first pairs never noised, R'_u short of R_u), and
    every user with pairs not noised yet is cut and goes through the second pass."""
    _table(con, string_keys=False)
    eager = _trace(con, False, 4, 1.0)
    monkeypatch.setattr(own, "candidate_limit", lambda *args: 0)
    _same(eager, _trace(con, True, 4, 1.0))


@pytest.mark.parametrize("limit", [0, 1])
def test_every_user_heavy_with_short_candidates(con, monkeypatch, limit):
    """Every user heavy (bound 0) and candidate limit 0 or 1: every user's prefixes run out, each falls back
    and goes through the second pass. The release is the eager one: same keys, same per-round counts, the
    same weights and noisy weights up to rounding (a key's Σ_u x_ui adds the same terms from rows restored
    in another order: DOUBLE sums differ in the last bits, so the exact comparison of `_same` does not hold
    here; found in stop 32, this pins that it is rounding, not another R̃_u)."""
    _table(con, string_keys=False)
    eager = _trace(con, False, 3, 1.0)
    monkeypatch.setattr(own, "candidate_limit", lambda *args: limit)
    monkeypatch.setattr(own, "heavy_bound", lambda *args: 0)
    monkeypatch.setattr(own, "may_be_heavy", lambda *args: True)
    lazy = _trace(con, True, 3, 1.0)
    assert lazy["keys"] == eager["keys"] and lazy["released"] == eager["released"]
    for got, want in [*zip(lazy["rounds"], eager["rounds"], strict=True), (lazy["last"], eager["last"])]:
        assert len(got) == len(want)
        np.testing.assert_allclose(np.array(got, dtype=object)[:, -2:].astype(float),
                                   np.array(want, dtype=object)[:, -2:].astype(float), rtol=1e-14, atol=0)


HEAVY_BOUND = 1500          # own.heavy_bound for these tests: user −1 (3,000 keys) heavy, user −2 (1,000) not


def _open_rows(monkeypatch) -> list[dict]:
    """Spy on round 2's reduction: per release, the heavy users (user → pair count is not stored, so their
    ids) and the open pairs of each user stored in round 2."""
    seen: list[dict] = []
    original = own.reduced_pairs
    monkeypatch.setattr(own, "heavy_bound", lambda *args: HEAVY_BOUND)
    monkeypatch.setattr(own, "may_be_heavy", lambda *args: True)        # the gate: test_heavy_gate

    def spy(engine, pairs, state, lazy):
        query = original(engine, pairs, state, lazy)
        rows = engine.ctx.con.sql(f"SELECT _dp_user, count(*) FROM ({query.sql}) GROUP BY ALL",
                                  params=query.params).fetchall()
        heavy = engine.ctx.con.sql(f"SELECT _dp_user FROM {engine.table_name(lazy.heavy)}").fetchall()
        seen.append({"open": dict(rows), "heavy": sorted(u for (u,) in heavy)})
        return query
    monkeypatch.setattr(own, "reduced_pairs", spy)
    return seen


def test_heavy_users_read_only_their_prefixes(con, monkeypatch):
    """Round 2 keeps of each heavy user (more open pairs than 8 Σ_j p_j) only the pairs in a later round's
    prefix, about Σ_j p_j of them, and every pair of the others; the release is still the eager one."""
    _table(con, string_keys=False)
    eager = _trace(con, False, 2, 4.0)
    seen = _open_rows(monkeypatch)
    _same(eager, _trace(con, True, 2, 4.0))
    (round2,) = seen
    assert round2["heavy"] == [-1]
    assert round2["open"][-1] < HEAVY_BOUND // 4 and round2["open"][-2] == HEAVY_KEYS // 3
    assert max(n for u, n in round2["open"].items() if u >= 0) <= 12


@pytest.mark.parametrize("sizes,rounds", [([0, 0], [2]), ([3, 3], [2]), ([200, 0], [3]), ([200, 3], [3])])
def test_heavy_prefix_run_out_falls_back(con, monkeypatch, sizes, rounds):
    """Prefixes too short to hold Δ0 pairs in play (p_j = 0: no pair kept, no candidate; 3 < Δ0 = 8), in
    round 2 or only in the last round (round 2's prefix long enough): the heavy users get every pair back
    (the fallback, in the round named) and the release is the eager one."""
    _table(con, string_keys=False)
    eager = _trace(con, False, 3, 1.0)
    monkeypatch.setattr(own, "prefix_sizes", lambda delta0, a_drop, rounds: sizes)
    monkeypatch.setattr(own, "heavy_bound", lambda *args: HEAVY_BOUND)
    monkeypatch.setattr(own, "may_be_heavy", lambda *args: True)
    decided: list[int] = []                                 # rounds whose state was made (own.state)
    restored: list[int] = []                                # the round of each fallback
    run_execute, original_state = RunContext.execute, own.state

    def counting(self, template, idents, params):
        if template == "adaptive_sips_unreduce":
            restored.append(1 + len(decided))
        return run_execute(self, template, idents, params)

    def state(*args, **kwargs):
        decided.append(1)
        return original_state(*args, **kwargs)
    monkeypatch.setattr(own, "state", state)
    monkeypatch.setattr(RunContext, "execute", counting)
    _same(eager, _trace(con, True, 3, 1.0))
    assert sorted(set(restored)) == rounds                 # the fallback ran, in that round


def test_heavy_prefix_without_fallback_is_caught(con, monkeypatch):
    """The check has power: with prefixes that run out and the fallback skipped (heavy users not restored)
    the release is not the eager one."""
    _table(con, string_keys=False)
    eager = _trace(con, False, 3, 1.0)
    monkeypatch.setattr(own, "prefix_sizes", lambda delta0, a_drop, rounds: [3] * (rounds - 1))
    monkeypatch.setattr(own, "heavy_bound", lambda *args: HEAVY_BOUND)
    monkeypatch.setattr(own, "may_be_heavy", lambda *args: True)
    run_execute = RunContext.execute
    monkeypatch.setattr(RunContext, "execute", lambda self, template, *args, **kwargs: None
                        if template == "adaptive_sips_unreduce" else run_execute(self, template, *args, **kwargs))
    with pytest.raises(AssertionError):
        _same(eager, _trace(con, True, 3, 1.0))


@pytest.mark.parametrize("heavy", [0, 400_000])
def test_heavy_gate(con, monkeypatch, heavy):
    """Without a user heavier than GATE_FACTOR × heavy_bound pairs, round 2 runs the statements it runs without
    heavy users (the gate's sample alone: no count of open pairs, no prefixes, the plain check); with one
    (400k pairs, stored user by user, over 8 × 11,904 at Δ0 = 8) the gate opens and its pairs are cut. Either
    way the release is the one with the gate shut."""
    rng = np.random.default_rng(7)
    users = np.repeat(np.arange(2000), 30)
    items = rng.integers(0, 5000, users.size)
    con.register("_src", pa.table({"user_id": np.concatenate([users, np.full(heavy, -1)]),
                                   "item": np.concatenate([items, np.arange(heavy)])}))
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM _src")
    con.unregister("_src")
    templates: list[str] = []
    original_query = DuckDBStages.query

    def query(self, template, *args, **kwargs):
        templates.append(template)
        return original_query(self, template, *args, **kwargs)

    def release() -> list:
        return duckdp.select(con, "t", algo="adaptive_sips", rho=1.0, delta=1e-5, max_contributions=DELTA0,
                             seed=4).to_arrow().column("item").to_pylist()
    with monkeypatch.context() as m:
        m.setattr(own, "may_be_heavy", lambda *args: False)
        shut = release()
    monkeypatch.setattr(DuckDBStages, "query", query)
    assert release() == shut and shut
    cut = {"adaptive_sips_heavy", "adaptive_sips_prefixes", "adaptive_sips_unsettled_heavy"}
    assert cut <= set(templates) if heavy else not cut & set(templates)
    assert "adaptive_sips_unsettled" not in templates if heavy else "adaptive_sips_unsettled" in templates


def _mark_unseeded(monkeypatch):
    """Seeded randomness marked unseeded: the key-id counters (the unseeded path's) with reproducible draws."""
    init = Randomness.__init__

    def unseeded(self, seed=None):
        init(self, seed)
        self.seeded = False

    monkeypatch.setattr(Randomness, "__init__", unseeded)


def test_lazy_on_key_ids(con, monkeypatch):
    """String keys on key ids (the unseeded path's injective UBIGINT counters), rendered with a seed's
    randomness marked unseeded: lazy and eager agree there too."""
    _table(con, string_keys=True)
    _mark_unseeded(monkeypatch)
    _same(_trace(con, False, 6, 1.0), _trace(con, True, 6, 1.0))


def test_seeded_string_keys_stay_eager(con):
    """Digest counters rank collisions among the keys present, so seeded string keys noise every key."""
    _table(con, string_keys=True)
    assert _trace(con, True, 1, 1.0)["noised"][0] >= HEAVY_KEYS


def test_candidates_out_of_the_truncation_order_are_caught(con, monkeypatch):
    """The check has power: candidates ordered under another salt than the truncation's (the mechanism
    hands `remaining` the round's salt) give another release."""
    _table(con, string_keys=False)
    eager = _trace(con, False, 1, 1.0)
    original = own.remaining
    monkeypatch.setattr(own, "remaining", lambda engine, pairs, state, salt, lazy=None:
                        original(engine, pairs, state, salt ^ 1, lazy))
    with pytest.raises(AssertionError):
        _same(eager, _trace(con, True, 1, 1.0))


def test_candidates_dropped_before_the_last_release(con, monkeypatch):
    """The last round reads neither its own candidates nor the round before's once their keys are noised
    and checked: no candidates table is left when the last round's weights are released."""
    _table(con, string_keys=False)
    live: list[list[str]] = []
    original = DuckDBStages.release

    def release(self, weights, plan):
        live.append([n for (n,) in self.ctx.con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary "
                                                         "AND table_name LIKE '%candidates%'").fetchall()])
        return original(self, weights, plan)
    monkeypatch.setattr(DuckDBStages, "release", release)
    duckdp.select(con, "t", algo="adaptive_sips", rho=1.0, delta=1e-5, max_contributions=DELTA0, seed=1)
    assert live == [[]]
    assert leftovers(con) == []


# -- MAD2R: round-1 noise of keys no user kept, drawn when round 2's truncation may keep them ----------------
def _trace_mad2r(con: duckdb.DuckDBPyConnection, lazy: bool, seed: int, rho: float, **params) -> dict:
    """One MAD2R release and what it computed: round 1's sorted (w, ŵ1) on the keys with a weight, how
    many keys were noised in round 1 (however late), round 2's stored vectors (bias flag and entries),
    round 2's weights by key, the keys and the per-round counts."""
    calls: list[tuple[list, int]] = []
    vectors: list[tuple] = []
    last: list[tuple] = []
    original_decide, original_release = DuckDBStages.decide_into, DuckDBStages.release
    original_vectors = mad.mad2r_vectors

    def decide_into(self, weights, plan, rule, read, round_tag=None):        # MAD2R's screen decides here
        pairs: list[tuple[float, float]] = []
        calls.append((pairs, 0))

        def spy(w, noisy):
            pairs.extend(zip(w[~np.isnan(w)].tolist(), noisy[~np.isnan(w)].tolist(), strict=True))
            calls[-1] = (pairs, calls[-1][1] + w.size)
            return rule(w, noisy)
        return original_decide(self, weights, plan, spy, read, round_tag=round_tag)

    def release(self, weights, plan):
        last.extend(sorted(self.ctx.con.sql(weights.sql, params=weights.params).fetchall()))
        return original_release(self, weights, plan)

    def round2_vectors(engine, *args):
        out = original_vectors(engine, *args)
        vectors.extend(sorted(engine.ctx.con.sql(f"SELECT _dp_user, _dp_k0, _dp_d, _dp_uw, _dp_biased FROM "
                                                 f"{engine.table_name(out)}").fetchall()))
        return out

    patches = [mock.patch.object(DuckDBStages, "decide_into", decide_into),
               mock.patch.object(DuckDBStages, "release", release),
               mock.patch.object(mad, "mad2r_vectors", round2_vectors)]
    if not lazy:
        patches.append(mock.patch.object(mad, "mad2r_lazy", lambda *args: False))
    for p in patches:
        p.start()
    try:
        out = duckdp.select(con, "t", algo="mad2r", rho=rho, delta=1e-5, max_contributions=DELTA0, seed=seed,
                            **params)
    finally:
        for p in patches:
            p.stop()
    return {"round1": sorted(calls[0][0]), "noised": sum(n for _, n in calls), "vectors": vectors, "last": last,
            "keys": out.to_arrow().column("item").to_pylist(), "released": [r.released for r in out.rounds]}


def _same_mad2r(eager: dict, lazy: dict, fewer: bool = True) -> None:
    """Everything but the number of keys noised is identical, bit for bit; lazy noises far fewer (unless
    every user is cut short: `fewer` False)."""
    for part in ("round1", "vectors", "last", "keys", "released"):
        assert lazy[part] == eager[part], part                 # floats compared exactly
    assert lazy["vectors"] and lazy["last"]
    assert eager["noised"] >= HEAVY_KEYS
    assert not fewer or HEAVY_KEYS > 2 * lazy["noised"]


# c_L = 0, c_U = 0.5 and a small round-1 share: many keys with weight 0 are biased or removed
STRESS = {"split": 0.02, "c_lower": 0.0, "c_upper": 0.5}


@pytest.mark.parametrize("seed,rho,params", [(1, 1.0, {}), (2, 4.0, {}), (3, 1.0, STRESS), (4, 0.3, STRESS)])
def test_mad2r_lazy_release_is_bit_identical_to_eager(con, seed, rho, params):
    _table(con, string_keys=False)
    eager = _trace_mad2r(con, False, seed, rho, **params)
    _same_mad2r(eager, _trace_mad2r(con, True, seed, rho, **params))
    assert leftovers(con) == []
    if params:      # the stress settings reach the biased users: flags of both kinds among round 2's vectors
        assert {row[-1] for row in eager["vectors"]} == {True, False}


def test_mad2r_second_pass_for_users_cut_short(con, monkeypatch):
    """Candidate limit 1: every user with pairs not noised is cut short and goes through the second pass."""
    _table(con, string_keys=False)
    eager = _trace_mad2r(con, False, 5, 1.0, **STRESS)
    late = []
    original = mad.add_exceptions
    monkeypatch.setattr(mad, "candidate_limit", lambda *args: 1)
    monkeypatch.setattr(mad, "add_exceptions", lambda *args: late.append(1) or original(*args))
    _same_mad2r(eager, _trace_mad2r(con, True, 5, 1.0, **STRESS), fewer=False)
    assert len(late) == 3           # round 1's screen, the first pass and the second


@pytest.mark.parametrize("truncation", ["per_user", "global"])
def test_mad2r_lazy_on_key_ids(con, monkeypatch, truncation):
    """String keys on key ids (the unseeded path's counters), rendered with a seed's randomness marked
    unseeded, under either truncation order: lazy and eager agree there too."""
    _table(con, string_keys=True)
    _mark_unseeded(monkeypatch)
    params = STRESS | {"truncation": truncation}
    _same_mad2r(_trace_mad2r(con, False, 6, 1.0, **params), _trace_mad2r(con, True, 6, 1.0, **params))


def test_mad2r_seeded_string_keys_stay_eager(con):
    _table(con, string_keys=True)
    assert _trace_mad2r(con, True, 1, 1.0)["noised"] >= HEAVY_KEYS


@pytest.mark.parametrize("heavy", [0, 100_000])
def test_mad2r_lazy_only_where_it_pays(con, monkeypatch, heavy):
    """The cost rule (`mad.mad2r_lazy`): on the benchmarks' synthetic data (100k rows, users of up to a few
    thousand keys: about 29 % of the pairs lie beyond each user's first m) MAD2R screens eagerly, where lazy
    noise costs more (benchmarks/RESULTS.md, "MAD2R lazy cost rule"); with one user holding 100k keys
    (about 70 % beyond) lazily, that user's candidates ranked over a prefix of its order (`heavy_limits`).
    Either way the release is the eager path's."""
    from duckdp.datasets import create_synthetic
    create_synthetic(con, "t", 100_000, seed=0)
    con.execute("INSERT INTO t SELECT -1, range FROM range(1, $n + 1)", {"n": heavy})
    late: list[int] = []
    original = mad.noise_late
    monkeypatch.setattr(mad, "noise_late", lambda *args: late.append(1) or original(*args))
    templates: list[str] = []
    original_query = DuckDBStages.query
    monkeypatch.setattr(DuckDBStages, "query", lambda self, template, *args, **kwargs:
                        templates.append(template) or original_query(self, template, *args, **kwargs))
    run = lambda: duckdp.select(con, "t", algo="mad2r", rho=0.1, delta=1e-5, max_contributions=100,  # noqa: E731
                                seed=1).to_arrow().column("item").to_pylist()
    keys = run()
    assert late == ([1] if heavy else [])
    # the heavy user's candidates over its prefix (100k pairs > H = 256 m, m = 288 at Δ0 = 100: `heavy_limits`)
    assert ("mad2r_prefix" in templates) == bool(heavy) and "mad2r_unprefix" not in templates
    with mock.patch.object(mad, "mad2r_lazy", lambda *args: False):
        assert run() == keys


# the bias-flag break shows where heavy users keep no biased key but screen some: few biased keys
@pytest.mark.parametrize("break_,seed,params", [("salt", 3, STRESS), ("tag", 3, STRESS),
                                                ("bias flag", 1, {"c_lower": 0.0, "split": 0.05})])
def test_mad2r_breaks_are_caught(con, monkeypatch, break_, seed, params):
    """The check has power: candidates ordered under another salt than round 2's truncation, late noise
    under another round's tag, or the bias flag over every remaining pair (the code before spec §4 was
    followed) each give another release or other round-2 vectors."""
    _table(con, string_keys=False)
    eager = _trace_mad2r(con, False, seed, 1.0, **params)
    if break_ == "salt":
        original = mad.noise_late
        monkeypatch.setattr(mad, "noise_late", lambda engine, pairs, support, status, lazy, plan2, d0, salt:
                            original(engine, pairs, support, status, lazy, plan2, d0, salt ^ 1))
    elif break_ == "tag":
        original_late = mad.noise_late

        def other_tag(engine, pairs, support, status, lazy, *rest):
            return original_late(engine, pairs, support, status, replace(lazy, tag=lazy.tag + 1), *rest)
        monkeypatch.setattr(mad, "noise_late", other_tag)
    else:
        assert not any(biased for user, *_, biased in eager["vectors"] if user < 0)
        original_query = DuckDBStages.query

        def flag_everything(self, template, idents, params=None):
            if template == "mad2r_remaining":      # the old flag: any remaining pair with b < 1, before truncation
                q = original_query(self, template, idents, params)
                keys, status = idents["keys"], idents["status"]
                return Query(f"SELECT r.*, bool_or(coalesce(s._dp_beta, 1.0) < 1) OVER (PARTITION BY _dp_user) "
                             f"AS _dp_all FROM ({q.sql}) AS r LEFT JOIN (SELECT {keys}, _dp_beta FROM {status} "
                             f"WHERE _dp_round2 IS NOT false) AS s USING ({keys})", q.params)
            if template == "mad2r_vectors":        # the flag over the kept pairs (set after it) → the old one
                q = original_query(self, template, idents, params)
                head, _, tail = q.sql.rpartition("false AS _dp_biased")
                return Query(head + "_dp_all AS _dp_biased" + tail, q.params)
            return original_query(self, template, idents, params)
        monkeypatch.setattr(DuckDBStages, "query", flag_everything)
    with pytest.raises(AssertionError):
        _same_mad2r(eager, _trace_mad2r(con, True, seed, 1.0, **params))


@pytest.mark.parametrize("algo", ["adaptive_sips", "mad2r"])
def test_lazy_with_truncation_in_passes(con, monkeypatch, algo):
    """Truncation in 3 user-hash passes (a tight memory limit): the candidates' per-user window runs in the
    same passes and noise stays lazy, with the same release as eager (which truncates in passes too)."""
    _table(con, string_keys=False)
    monkeypatch.setattr(DuckDBStages, "truncation_passes", lambda self: 3)
    if algo == "mad2r":
        _same_mad2r(_trace_mad2r(con, False, 3, 1.0, **STRESS), _trace_mad2r(con, True, 3, 1.0, **STRESS))
    else:
        _same(_trace(con, False, 2, 1.0), _trace(con, True, 2, 1.0))


# -- MAD2R: round 2 reads a settled cut user's pairs up to its last candidate only ---------------------------
def _unpruned(engine, pairs, cuts, salt):
    """`mad.pruned` undone: round 2 over every stored pair."""
    return pairs


def _same_rounds(unpruned: dict, pruned: dict) -> None:
    """Everything computed is identical, bit for bit (both lazy: the same keys noised too)."""
    for part in ("round1", "noised", "vectors", "last", "keys", "released"):
        assert pruned[part] == unpruned[part], part
    assert pruned["vectors"] and pruned["last"]


@pytest.mark.parametrize("seed,params", [(1, {}), (3, STRESS), (6, STRESS | {"truncation": "global"})])
def test_mad2r_pruned_round2_is_bit_identical_to_unpruned(con, monkeypatch, seed, params):
    """The pruning leaves every user's kept pairs, d, bias flag and entries unchanged (spec §6, "Pruned
    round-2 input"): pruned vs unpruned bit for bit, while the heavy users' pairs past their cut are gone."""
    _table(con, string_keys=False)
    with mock.patch.object(mad, "pruned", _unpruned):
        unpruned = _trace_mad2r(con, True, seed, 1.0, **params)
    heavy: list[tuple[int, int]] = []
    original = mad.pruned

    def counted(engine, pairs, cuts, salt):
        out = original(engine, pairs, cuts, salt)
        heavy.append(engine.ctx.con.sql(f"SELECT count(*) FILTER (WHERE _dp_user < 0), count(*) FROM ({out.sql})",
                                        params=out.params).fetchall()[0])
        return out
    monkeypatch.setattr(mad, "pruned", counted)
    _same_rounds(unpruned, _trace_mad2r(con, True, seed, 1.0, **params))
    (kept_heavy, kept), = heavy
    assert kept_heavy < HEAVY_KEYS // 4                     # of 4,000 heavy pairs: each user's first ones only
    assert kept - kept_heavy == con.sql("SELECT count(*) FROM t WHERE user_id >= 0").fetchall()[0][0]


@pytest.mark.parametrize("break_", ["unsettled cut", "salt"])
def test_mad2r_wrong_cut_is_caught(con, monkeypatch, break_):
    """The check has power: cutting the users whose candidates did not settle R̃_u too (candidate limit 1:
    every heavy user) drops pairs their truncation keeps, and round 2 differs; pruning in another order than
    the truncation's (salt ^ 1) is refused, since both bind the one $trunc_salt."""
    _table(con, string_keys=False)
    monkeypatch.setattr(mad, "candidate_limit", lambda *args: 1)
    with mock.patch.object(mad, "pruned", _unpruned):
        unpruned = _trace_mad2r(con, True, 1, 1.0, **STRESS)
    if break_ == "salt":
        original = mad.pruned
        monkeypatch.setattr(mad, "pruned", lambda engine, pairs, cuts, salt: original(engine, pairs, cuts, salt ^ 1))
        with pytest.raises(RuntimeError, match="trunc_salt"):
            _trace_mad2r(con, True, 1, 1.0, **STRESS)
        return
    original_query = DuckDBStages.query

    def cut_everyone(self, template, idents, params=None):
        if template == "mad2r_cuts":
            idents = idents | {"unsettled": "(SELECT NULL::BIGINT AS _dp_user WHERE false)"}
        return original_query(self, template, idents, params)
    monkeypatch.setattr(DuckDBStages, "query", cut_everyone)
    with pytest.raises(AssertionError):
        _same_rounds(unpruned, _trace_mad2r(con, True, 1, 1.0, **STRESS))


@pytest.mark.parametrize("truncation", ["per_user", "global"])
def test_lazy_equals_eager_where_truncation_orders_tie(con, truncation):
    """Keys in pairs with equal DuckDB hashes (HUGEINT, `_table(tied=True)`), so both truncations' keyed
    orders tie throughout the heavy users' keys: the eager truncation breaks ties on the key, the lazy
    candidates take tied pairs together and settle users on pairs strictly before their last one, so
    lazy still equals eager bit for bit, for adaptive SIPS and MAD2R."""
    _table(con, string_keys=False, tied=True)
    assert con.sql("SELECT count(*) - count(DISTINCT hash(item)) FROM (SELECT DISTINCT item FROM t)").fetchall()[0][0] \
        > HEAVY_KEYS // 3                                       # ties: not vacuous
    _same(_trace(con, False, 1, 1.0, truncation), _trace(con, True, 1, 1.0, truncation))
    _same_mad2r(_trace_mad2r(con, False, 2, 1.0, truncation=truncation),
                _trace_mad2r(con, True, 2, 1.0, truncation=truncation))
    assert leftovers(con) == []


# -- MAD2R: a heavy user's candidates ranked over a prefix of its order (`noise_late`, `heavy_limits`) -------
def _heavy_path(monkeypatch, prefix: Callable[[int], int] | None = None) -> dict[str, list]:
    """MAD2R's heavy-user prefixes forced on for users over 100 pairs (the two heavy users of `_table`), with
    the prefix P = `prefix(m)` (default 16 m, as shipped); records how many of each user's pairs the prefix
    kept (mad2r_prefix.sql) and the users that went through the fallback (`mad.restore`)."""
    seen: dict[str, list] = {"prefix": [], "ranked": [], "restored": []}
    shipped = mad.heavy_limits
    monkeypatch.setattr(mad, "heavy_limits", lambda limit: ((shipped(limit)[0] if prefix is None else prefix(limit)),
                                                            100))
    original_query, original_restore = DuckDBStages.query, mad.restore

    def query(self, template, idents, params=None):
        q = original_query(self, template, idents, params)
        if template == "mad2r_candidates":
            seen["ranked"].append(idents["users"])
        if template == "mad2r_prefix":
            seen["prefix"].append(dict(self.ctx.con.sql(f"SELECT _dp_user, count(*) FROM {q.sql} GROUP BY ALL",
                                                        params=q.params).fetchall()))
        return q

    def restore(engine, candidates, short, ranked):
        seen["restored"].append(sorted(u for (u,) in engine.ctx.con.sql(f"SELECT _dp_user FROM {short}").fetchall()))
        return original_restore(engine, candidates, short, ranked)
    monkeypatch.setattr(DuckDBStages, "query", query)
    monkeypatch.setattr(mad, "restore", restore)
    return seen


@pytest.mark.parametrize("seed,params,passes", [(1, {}, 1), (3, STRESS, 1), (4, STRESS, 3),
                                                (6, STRESS | {"truncation": "global"}, 1)])
def test_mad2r_heavy_prefix_is_bit_identical_to_eager(con, monkeypatch, seed, params, passes):
    """With the heavy path on (users over 100 pairs, P = 16 m as shipped; also with the candidates in 3
    user-hash passes, and under global truncation) the heavy user −1's candidates are ranked over about P of
    its 3,000 pairs and the release is the eager one, bit for bit; user −2 (1,000 pairs, under P) keeps all."""
    _table(con, string_keys=False)
    monkeypatch.setattr(DuckDBStages, "truncation_passes", lambda self: passes)
    eager = _trace_mad2r(con, False, seed, 1.0, **params)
    seen = _heavy_path(monkeypatch)
    _same_mad2r(eager, _trace_mad2r(con, True, seed, 1.0, **params))
    (kept,) = seen["prefix"]
    assert len(seen["ranked"]) == passes                                     # one ranking per user-hash part
    assert kept[-1] < HEAVY_KEYS * 3 // 4 and kept[-2] == HEAVY_KEYS // 3   # the prefix cut user −1 only
    assert kept[0] > 0 and seen["restored"] == []
    assert leftovers(con) == []


@pytest.mark.parametrize("prefix", [0, 3, 40])
def test_mad2r_heavy_prefix_run_out_falls_back(con, monkeypatch, prefix):
    """Prefixes too short to hold m pairs not noised (P = 0: none, no candidate row at all; 3; 40 < m): both
    heavy users go through the fallback (candidates deleted, ranked over all their pairs) and the release is
    the eager one, bit for bit."""
    _table(con, string_keys=False)
    eager = _trace_mad2r(con, False, 3, 1.0, **STRESS)
    seen = _heavy_path(monkeypatch, lambda limit: prefix)
    _same_mad2r(eager, _trace_mad2r(con, True, 3, 1.0, **STRESS))
    assert seen["restored"] == [[-2, -1]]
    assert leftovers(con) == []


def test_mad2r_heavy_prefix_without_fallback_is_caught(con, monkeypatch):
    """The check has power: with prefixes too short (P = 3) and the fallback skipped, the heavy users look
    uncut (fewer than m candidates), their unscreened keys reach round 2 unbiased, and the release differs."""
    _table(con, string_keys=False)
    eager = _trace_mad2r(con, False, 3, 1.0, **STRESS)
    _heavy_path(monkeypatch, lambda limit: 3)
    monkeypatch.setattr(mad, "restore", lambda *args: None)
    with pytest.raises(AssertionError):
        _same_mad2r(eager, _trace_mad2r(con, True, 3, 1.0, **STRESS))


def test_mad2r_heavy_gate(con, monkeypatch):
    """With the shipped limits no user of `_table` is over H (Δ0 = 8: H = 256 m, m ≈ 80): the candidates run
    as without heavy users (no prefix, no check), the same statements as before the heavy path."""
    _table(con, string_keys=False)
    templates: list[str] = []
    original_query = DuckDBStages.query
    monkeypatch.setattr(DuckDBStages, "query", lambda self, template, *args, **kwargs:
                        templates.append(template) or original_query(self, template, *args, **kwargs))
    _trace_mad2r(con, True, 1, 1.0)
    assert "mad2r_candidates" in templates
    assert not {"mad2r_prefix", "mad2r_short"} & set(templates)


@pytest.mark.parametrize("prefix", [None, 3])
def test_mad2r_heavy_prefix_on_key_ids(con, monkeypatch, prefix):
    """String keys on key ids (the unseeded path's counters, a seed's randomness marked unseeded) with the heavy
    path on, the prefix as shipped and too short (the fallback): lazy = eager there too."""
    _table(con, string_keys=True)
    _mark_unseeded(monkeypatch)
    eager = _trace_mad2r(con, False, 6, 1.0, **STRESS)
    seen = _heavy_path(monkeypatch, None if prefix is None else lambda limit: prefix)
    _same_mad2r(eager, _trace_mad2r(con, True, 6, 1.0, **STRESS))
    assert seen["prefix"] and seen["restored"] == ([] if prefix is None else [[-2, -1]])
