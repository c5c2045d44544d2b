"""The stage contract every engine inherits (the dp_accounting `PrivacyAccountantTest` pattern).

`StageContract` runs each generic stage of duckdp/stages on fixed small frames and compares the
engine's output exactly with the reference engine's (tests/reference_engine.py: pyarrow/numpy, the
formulas of tests/reference_*.py); known-answer checks pin the reference itself. An engine's test
class subclasses it and supplies `open_stages`, `frame` and `collect` (tests/test_contract_*.py).

Exactness: every user holds 1, 4 or 16 keys, so each weight term d^(−e) for e ∈ {½, 1, 0} is a
dyadic rational and any summation order gives the same double; noise is the engine-neutral PRF
(duckdp/prf.py) on each key's counter, so the same seed gives the same released keys everywhere.
Truncation hashes are engine-specific: a truncated frame is checked by its properties (Δ0 kept
pairs per user, all the user's own, `_dp_d`, a function of the salt alone), not row by row.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from reference_engine import ReferenceEngine

import duckdp
from duckdp import mechanisms
from duckdp.mechanisms.base import Params
from duckdp.rng import Randomness

# -- fixed frames --------------------------------------------------------------------------------
_SETS: dict[int, list[int]] = {
    0: list(range(1, 17)),                       # 16 keys
    1: [1, 2, 3, 4],
    2: [1],
    3: [2, 5, 7, 20],
    4: [3],                                      # given twice below: pairs are distinct
    5: list(range(5, 21)),
    6: [20],
    13: [-3, -1, 0, 2**40],                      # counters: negative, zero and wide integers
    **{u: list(range(100 + u, 132 + u, 2)) for u in range(7, 13)},   # six more users with 16 keys
}
_DUPLICATES = [(4, 3), (1, 2), (0, 16)]
_TEXT = {-3: "", -1: "é☃", 0: "x:y", 2**40: "k:2:40"}           # string keys that stress the encoding


def _text(key: int) -> str:
    return _TEXT.get(key, f"k{key}")


def input_table(key_type: str) -> pa.Table:
    """The fixed input (user_id BIGINT, item BIGINT or VARCHAR), duplicate rows included."""
    rows = [(u, k) for u, ks in _SETS.items() for k in ks] + _DUPLICATES
    items: list[Any] = [k for _, k in rows]
    item = pa.array(items, pa.int64()) if key_type == "BIGINT" else pa.array([_text(k) for k in items], pa.string())
    return pa.table({"user_id": pa.array([u for u, _ in rows], pa.int64()), "item": item})


def mechanism_table(key_type: str) -> pa.Table:
    """400 users of 1 or 4 keys (dyadic weights) from 60 Zipf-popular keys: released counts near every
    threshold of the generic mechanisms at ε = 1, Δ0 = 4."""
    rng = np.random.default_rng(19)
    p = 1.0 / np.arange(1, 61)
    p /= p.sum()
    rows = [(u, int(k)) for u in range(400) for k in rng.choice(60, size=int(rng.choice([1, 4])), replace=False, p=p)]
    items = [k for _, k in rows]
    item = pa.array(items, pa.int64()) if key_type == "BIGINT" else pa.array([_text(k) for k in items], pa.string())
    return pa.table({"user_id": pa.array([u for u, _ in rows], pa.int64()), "item": item})


def keys_table(keys: list[int], key_type: str) -> pa.Table:
    """A key frame (`_dp_k0`) of the given keys."""
    return pa.table({"_dp_k0": pa.array(keys, pa.int64()) if key_type == "BIGINT"
                     else pa.array([_text(k) for k in keys], pa.string())})


def weights_table(key_type: str) -> pa.Table:
    """64 keys (negative ones too) with dyadic weights k/8 ∈ [−1, 6.875]: the release stage's input."""
    keys = list(range(-8, 56))
    return keys_table(keys, key_type).append_column("_dp_w", pa.array([k / 8 for k in keys], pa.float64()))


def rows(table: pa.Table) -> list[tuple]:
    """A frame's rows as sorted tuples over its columns in name order (row order is not contractual)."""
    names = sorted(table.column_names)
    cols = [table.column(n).to_pylist() for n in names]
    return sorted(zip(*cols, strict=True), key=lambda r: tuple((v is None, type(v).__name__, v) for v in r))


KEY_TYPES = ["BIGINT", "VARCHAR"]
SEED = 2024
# Mechanisms made only of generic stages: their whole run is part of the contract (no truncation active).
GENERIC_MECHANISMS = ["weighted_gaussian", "weighted_laplace", "count_gaussian", "count_laplace", "dpsips"]


class StageContract:
    """Generic stage tests every engine passes; subclasses implement the three adapter methods."""

    # -- adapter ---------------------------------------------------------------------------------------
    def open_stages(self, table: pa.Table, seed: int) -> AbstractContextManager:
        """A context manager giving the engine's stages of one run over `table` (columns user_id, item)."""
        raise NotImplementedError

    def frame(self, stages, table: pa.Table):
        """An engine frame holding `table` (internal column names)."""
        raise NotImplementedError

    def collect(self, stages, frame) -> pa.Table:
        """An engine frame's rows as Arrow."""
        raise NotImplementedError

    # -- the oracle ------------------------------------------------------------------------------------
    @staticmethod
    def reference(table: pa.Table, seed: int) -> ReferenceEngine:
        return ReferenceEngine(table, Randomness(seed))

    def both(self, key_type: str, seed: int = SEED) -> Iterator[tuple[Any, ReferenceEngine]]:
        table = input_table(key_type)
        with self.open_stages(table, seed) as stages:
            yield stages, self.reference(table, seed)

    # -- pairs, sized ----------------------------------------------------------------------------------
    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_pairs(self, key_type):
        for stages, ref in self.both(key_type):
            got = self.collect(stages, stages.pairs())
            assert got.column_names == ["_dp_user", "_dp_k0"]
            assert rows(got) == rows(ref.pairs())
            assert got.num_rows == sum(len(k) for k in _SETS.values())      # duplicates gone

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_sized(self, key_type):
        for stages, ref in self.both(key_type):
            got = self.collect(stages, stages.sized(stages.pairs()))
            assert rows(got) == rows(ref.sized(ref.pairs()))
            sizes = zip(got.column("_dp_user").to_pylist(), got.column("_dp_size").to_pylist(), strict=True)
            assert set(sizes) == {(u, len(k)) for u, k in _SETS.items()}

    # -- truncate --------------------------------------------------------------------------------------
    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_truncate_within_delta0_keeps_every_pair(self, key_type):
        for stages, ref in self.both(key_type):
            got = self.collect(stages, stages.truncate(stages.sized(stages.pairs()), 16))
            assert sorted(got.column_names) == ["_dp_d", "_dp_k0", "_dp_user"]
            assert rows(got) == rows(ref.truncate(ref.sized(ref.pairs()), 16))

    def kept_by_user(self, key_type: str, seed: int, max_contributions: int) -> dict:
        table = input_table(key_type)
        with self.open_stages(table, seed) as stages:
            got = self.collect(stages, stages.truncate(stages.sized(stages.pairs()), max_contributions))
        kept: dict = defaultdict(list)
        for u, k, d in zip(*(got.column(c).to_pylist() for c in ("_dp_user", "_dp_k0", "_dp_d")), strict=True):
            kept[u].append((k, d))
        return {u: sorted(pairs, key=repr) for u, pairs in kept.items()}

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_truncate_keeps_delta0_of_the_users_own_pairs(self, key_type):
        kept = self.kept_by_user(key_type, SEED, 4)
        pairs = self.reference(input_table(key_type), SEED).pairs()
        own = defaultdict(set)
        for u, k in zip(pairs.column("_dp_user").to_pylist(), pairs.column("_dp_k0").to_pylist(), strict=True):
            own[u].add(k)
        assert sorted(kept) == sorted(own)
        for u, pairs_kept in kept.items():
            ks = [k for k, _ in pairs_kept]
            assert len(ks) == len(set(ks)) == min(len(own[u]), 4) and set(ks) <= own[u]
            assert {d for _, d in pairs_kept} == {float(min(len(own[u]), 4))}

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_truncate_is_a_function_of_the_salt(self, key_type, monkeypatch):
        """The same salt keeps the same pairs whatever else differs (here: the seed); another salt
        keeps other pairs for some of the eight users over Δ0."""
        first = self.kept_by_user(key_type, 1, 4)
        assert first == self.kept_by_user(key_type, 1, 4)
        assert first != self.kept_by_user(key_type, 2, 4)
        monkeypatch.setattr(Randomness, "salt", lambda self: 123456789)
        fixed = self.kept_by_user(key_type, 1, 4)
        assert fixed == self.kept_by_user(key_type, 2, 4)

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_truncate_global_keeps_the_first_keys_of_one_order(self, key_type):
        """truncation="global": every user over Δ0 keeps the Δ0 first of its keys in ONE order of the keys
        (a secret one): the constraints "kept key before dropped key", over all users, have no cycle (the
        overlapping 16-key users make one certain under per-user orders); users within Δ0 keep all."""
        from graphlib import TopologicalSorter

        table = input_table(key_type)
        with self.open_stages(table, SEED) as stages:
            stages.truncation = "global"
            got = self.collect(stages, stages.truncate(stages.sized(stages.pairs()), 4))
        kept: dict = defaultdict(set)
        for u, k in zip(got.column("_dp_user").to_pylist(), got.column("_dp_k0").to_pylist(), strict=True):
            kept[u].add(k)
        own = {u: {k if key_type == "BIGINT" else _text(k) for k in ks} for u, ks in _SETS.items()}
        after: dict = defaultdict(set)          # key → the keys some user kept while dropping it
        for u, keys in own.items():
            assert kept[u] <= keys and len(kept[u]) == min(len(keys), 4)
            for dropped in keys - kept[u]:
                after[dropped] |= kept[u]
        tuple(TopologicalSorter(after).static_order())       # graphlib.CycleError: no single order

    # -- weights ---------------------------------------------------------------------------------------
    @pytest.mark.parametrize("key_type", KEY_TYPES)
    @pytest.mark.parametrize("exponent", [0.5, 1.0, 0.0])
    def test_weights(self, key_type, exponent):
        for stages, ref in self.both(key_type):
            got = self.collect(stages, stages.weights(stages.truncate(stages.sized(stages.pairs()), 16), exponent))
            want = ref.weights(ref.truncate(ref.sized(ref.pairs()), 16), exponent)
            assert rows(got) == rows(want)
            # known answers: key 1 is held by users of sizes 16, 4, 1; key 20 by sizes 4, 16, 1
            w = dict(zip(want.column("_dp_k0").to_pylist(), want.column("_dp_w").to_pylist(), strict=True))
            one, twenty = (1, 20) if key_type == "BIGINT" else ("k1", "k20")
            assert w[one] == w[twenty] == {0.5: 0.25 + 0.5 + 1.0, 1.0: 1 / 16 + 0.25 + 1.0, 0.0: 3.0}[exponent]

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    @pytest.mark.parametrize("exponent", [1.0, 0.0])
    def test_weights_of_a_truncated_frame(self, key_type, exponent):
        """Σ_keys w = Σ_u min(|W_u|, Δ0)^(1−e): each user adds d·d^(−e) whichever pairs it keeps."""
        with self.open_stages(input_table(key_type), SEED) as stages:
            got = self.collect(stages, stages.weights(stages.truncate(stages.sized(stages.pairs()), 4), exponent))
        want = sum(min(len(k), 4) ** (1 - exponent) for k in _SETS.values())
        assert sum(got.column("_dp_w").to_pylist()) == want

    # -- release ---------------------------------------------------------------------------------------
    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_release(self, key_type):
        """A fixed plan and seed: the same keys as the reference, round after round (fresh round tags)."""
        plans = [SimpleNamespace(noise="gaussian", scale=2.0, threshold=3.0),
                 SimpleNamespace(noise="laplace", scale=1.5, threshold=2.5),
                 SimpleNamespace(noise="gaussian", scale=2.0, threshold=3.0)]
        for stages, ref in self.both(key_type):
            released = []
            for plan in plans:
                got = self.collect(stages, stages.release(self.frame(stages, weights_table(key_type)), plan))
                want = ref.release(weights_table(key_type), plan)
                assert got.column_names == ["_dp_k0"]
                assert rows(got) == rows(want)
                assert 0 < got.num_rows < 64                           # both outcomes occur
                released.append(rows(got))
            assert released[0] != released[2]                          # same plan, next round: fresh noise

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_decide_with_a_drawn_round_tag(self, key_type):
        """`decide(round_tag=t)` draws round t's noise: a second call on some of the keys gets the same
        noisy weights, bit for bit (what lazy noise relies on), the reference's; without a tag, a fresh
        round's."""
        plan = SimpleNamespace(noise="gaussian", scale=2.0, threshold=3.0)

        def everything(w, noisy):
            return np.ones(w.size, bool), {"_dp_x": noisy}

        def noisy(stages, keys: list[int], tag: int | None) -> dict:
            table = keys_table(keys, key_type).append_column("_dp_w", pa.nulls(len(keys), pa.float64()))
            out = self.collect(stages, stages.decide(self.frame(stages, table), plan, everything,
                                                     {"_dp_x": "double"}, round_tag=tag))
            return dict(zip(out.column("_dp_k0").to_pylist(), out.column("_dp_x").to_pylist(), strict=True))

        for stages, ref in self.both(key_type):
            tag = stages.randomness.next_round()
            first = noisy(stages, list(range(-8, 56)), tag)
            table = keys_table([5, 7], key_type).append_column("_dp_w", pa.nulls(2, pa.float64()))
            want = ref.decide(table, plan, everything, {"_dp_x": "double"}, round_tag=ref.randomness.next_round())
            assert want.column("_dp_x").to_pylist() == [first[k] for k in want.column("_dp_k0").to_pylist()]
            later = noisy(stages, list(range(0, 56, 3)), tag)
            fresh = noisy(stages, list(range(0, 56, 3)), None)
            assert len(first) == 64 and len(later) == len(fresh) == 19
            assert all(first[k] == v for k, v in later.items())
            assert all(fresh[k] != v for k, v in later.items())

    # -- remove, store, append, union, output ------------------------------------------------------------
    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_remove(self, key_type):
        gone = keys_table([1, 2, 20, 99], key_type)
        for stages, ref in self.both(key_type):
            got = self.collect(stages, stages.remove(stages.pairs(), self.frame(stages, gone)))
            want = ref.remove(ref.pairs(), gone)
            assert rows(got) == rows(want)
            assert want.num_rows == sum(len(set(k) - {1, 2, 20}) for k in _SETS.values())

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_store_empty_keys_append(self, key_type):
        for stages, _ref in self.both(key_type):
            stored = stages.empty_keys(stages.store(stages.pairs(), "pairs"))
            assert rows(self.collect(stages, stored)) == []
            stored, added = stages.append(stored, self.frame(stages, keys_table([1, 5, -3], key_type)))
            stored, again = stages.append(stored, self.frame(stages, keys_table([7], key_type)))
            assert (added, again) == (3, 1)
            assert rows(self.collect(stages, stored)) == rows(keys_table([1, 5, -3, 7], key_type))

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_union(self, key_type):
        a, b = keys_table([1, 2], key_type), keys_table([3, -1], key_type)
        for stages, ref in self.both(key_type):
            got = self.collect(stages, stages.union(self.frame(stages, a), self.frame(stages, b)))
            assert rows(got) == rows(ref.union(a, b)) and got.num_rows == 4

    @pytest.mark.parametrize("key_type", KEY_TYPES)
    def test_output(self, key_type):
        """The input's key column name and type, the keys' values, sorted by key (a function of the released
        set alone: the output stage's contract)."""
        keys = keys_table([5, -3, 2**40, 1], key_type)
        for stages, ref in self.both(key_type):
            got = stages.output(self.frame(stages, keys))
            want = ref.output(keys)
            assert got.column_names == want.column_names == ["item"]
            assert got.schema.field("item").type in ({pa.int64()} if key_type == "BIGINT"
                                                     else {pa.string(), pa.large_string(), pa.string_view()})
            listed = got.column("item").to_pylist()
            assert listed == want.column("item").to_pylist() == sorted(keys.column(0).to_pylist())
            assert stages.num_rows(got) == 4

    # -- whole mechanisms made of generic stages ---------------------------------------------------------
    @pytest.mark.parametrize("key_type", KEY_TYPES)
    @pytest.mark.parametrize("algo", GENERIC_MECHANISMS)
    def test_mechanism_runs_like_the_reference(self, key_type, algo):
        """The mechanism's own run() on this engine and on the reference: the same keys and rounds."""
        mech = mechanisms.get(algo)
        params = Params(4, mech.check_params({}))
        plan = mech.plan(duckdp.EpsDelta(1.0, 1e-5), params)
        table = mechanism_table(key_type)
        with self.open_stages(table, SEED) as stages:
            got, rounds = mech.run(stages, plan, params)
        want, want_rounds = mech.run(self.reference(table, SEED), plan, params)
        assert Counter(got.column("item").to_pylist()) == Counter(want.column("item").to_pylist())
        assert [(r.sigma, r.threshold, r.released) for r in rounds] == \
            [(r.sigma, r.threshold, r.released) for r in want_rounds]
        assert 0 < want.num_rows < len(set(table.column("item").to_pylist()))     # some keys, not all
