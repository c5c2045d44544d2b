"""A pure pyarrow/numpy engine for the GENERIC stages of duckdp/stages (the contract's oracle).

Frames are pyarrow Tables with the column contract of `duckdp/stages/__init__.py` (`_dp_user`,
`_dp_k0 …`, `_dp_size`, `_dp_d`, `_dp_w`). The weights are `reference_basic.kept_weights` (Gopi et al.
§1.1), the noise is duckdp's engine-neutral PRF (duckdp/prf.py) on the counters of
duckdp/counters.py computed here in Python, so a seeded stage gives exactly DuckDB's and Spark's
output. Truncation keeps, per user over Δ0, the Δ0 pairs of smallest keyed BLAKE2b digest under
the stage's salt: a uniform subset fixed by the salt, like the engines' (whose hashes differ, so
the kept sets are compared by their properties, not row by row). Only the generic stages exist
here, so mechanisms built from them (the Basic family, DP-SIPS) run on it unchanged:
`mech.run(ReferenceEngine(table, Randomness(seed)), plan, params)`.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict

import numpy as np
import pyarrow as pa
from reference_basic import kept_weights

from duckdp.rng import Randomness


def counter(key: tuple) -> tuple[int, int, bool]:
    """(hi, lo, may_collide) of a key tuple (duckdp/counters.py): one integer column is its own 128-bit
    two's complement; anything else the MD5 of ‖ len(s_i) ':' s_i (s_i its text, len in bytes), hi/lo
    = digest bytes 0–7 / 8–15 read little-endian."""
    if len(key) == 1 and isinstance(key[0], int) and not isinstance(key[0], bool):
        return (-1 if key[0] < 0 else 0), key[0] & (2**64 - 1), False
    enc = b"".join(str(len(s.encode())).encode() + b":" + s.encode() for s in map(str, key))
    digest = hashlib.md5(enc).digest()
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little"), True


def _sort_key(value):
    return (value is None, value)


class ReferenceEngine:
    """The generic stages (pairs, sized, truncate, weights, release, decide, remove, store, empty_keys,
    append, union, output, num_rows, drop) of one run over an Arrow input table."""

    engine = "reference"

    def __init__(self, table: pa.Table, randomness: Randomness, user_col: str = "user_id",
                 item_col: str | list[str] = "item"):
        self.key_names = [item_col] if isinstance(item_col, str) else list(item_col)
        self.keys = [f"_dp_k{i}" for i in range(len(self.key_names))]
        self.input = table.select([user_col, *self.key_names]).rename_columns(["_dp_user", *self.keys])
        self.randomness = randomness
        self.truncation = "per_user"      # or "global": the truncation digest keys the key alone

    # -- helpers --------------------------------------------------------------------------------
    def _key_tuples(self, frame: pa.Table) -> list[tuple]:
        return list(zip(*(frame.column(k).to_pylist() for k in self.keys), strict=True))

    def _take(self, frame: pa.Table, mask) -> pa.Table:
        return frame.filter(pa.array(np.asarray(mask, bool), pa.bool_()))

    # -- generic stages -------------------------------------------------------------------------
    def pairs(self) -> pa.Table:
        """Distinct (user, key) pairs (sql/stage_pairs.sql)."""
        return self.input.group_by(["_dp_user", *self.keys], use_threads=False).aggregate([])

    def round_pairs(self) -> pa.Table:
        """`pairs` for a mechanism reading them over rounds (the reference keeps the key columns)."""
        return self.pairs()

    def sized(self, pairs: pa.Table) -> pa.Table:
        """`_dp_size` = the user's number of pairs |W_u| (sql/stage_sized.sql)."""
        users = pairs.column("_dp_user").to_pylist()
        size: dict = defaultdict(int)
        for u in users:
            size[u] += 1
        return pairs.append_column("_dp_size", pa.array([size[u] for u in users], pa.int64()))

    def truncate(self, sized: pa.Table, max_contributions: int, salt: int | None = None) -> pa.Table:
        """Each user over Δ0 keeps the Δ0 pairs of smallest keyed digest of (user, key), or of the key under
        truncation="global", under a fresh salt (or `salt`); `_dp_d` = min(|W_u|, Δ0) (sql/stage_truncate.sql's
        contract)."""
        key = (self.randomness.salt() if salt is None else salt).to_bytes(8, "big")
        users = sized.column("_dp_user").to_pylist()
        keys = self._key_tuples(sized)
        order: dict = defaultdict(list)
        for row, (u, k) in enumerate(zip(users, keys, strict=True)):
            hashed = k if self.truncation == "global" else (u, k)
            digest = hashlib.blake2b(repr(hashed).encode(), key=key, digest_size=8).digest()
            order[u].append((digest, row))
        keep = np.zeros(len(users), bool)
        for rows in order.values():
            for _, row in sorted(rows)[:max_contributions]:
                keep[row] = True
        kept = self._take(sized, keep)
        d = [float(min(s, max_contributions)) for s in kept.column("_dp_size").to_pylist()]
        return kept.drop_columns(["_dp_size"]).append_column("_dp_d", pa.array(d, pa.float64()))

    def weights(self, kept: pa.Table, exponent: float) -> pa.Table:
        """Per key Σ `_dp_d`^(−exponent) (reference_basic.kept_weights; Gopi et al. ICML 2020 §1.1)."""
        w = kept_weights(zip(self._key_tuples(kept), kept.column("_dp_d").to_pylist(), strict=True), exponent)
        keys = sorted(w, key=lambda k: tuple(map(_sort_key, k)))
        cols = {name: [k[i] for k in keys] for i, name in enumerate(self.keys)}
        return pa.table({**{n: pa.array(v, kept.schema.field(n).type) for n, v in cols.items()},
                         "_dp_w": pa.array([w[k] for k in keys], pa.float64())})

    def release(self, weights: pa.Table, plan) -> pa.Table:
        """Keys with `_dp_w` + plan.scale · z ≥ plan.threshold, z the run's PRF noise of the next round
        on each key's counter (collision rank by key order among keys sharing a digest counter)."""
        _, noisy = self._noisy(weights, plan, self.randomness.next_round())
        return self._take(weights, noisy >= plan.threshold).select(self.keys)

    def decide(self, weights: pa.Table, plan, rule, added: dict[str, str], round_tag: int | None = None) -> pa.Table:
        """The rows `rule(w, noisy)` keeps (w NaN where NULL, noisy as in `release`, round `round_tag` or
        the next), with the columns it adds."""
        tag = self.randomness.next_round() if round_tag is None else round_tag
        w, noisy = self._noisy(weights, plan, tag)
        mask, extra = rule(w, noisy)
        out = self._take(weights, mask).select(self.keys)
        for name in added:
            out = out.append_column(name, pa.array(np.asarray(extra[name])[np.asarray(mask, bool)]))
        return out

    def _noisy(self, weights: pa.Table, plan, tag: int) -> tuple[np.ndarray, np.ndarray]:
        """(w with NaN where NULL, w (0 where NULL) + plan.scale · z) under round `tag`."""
        keys = self._key_tuples(weights)
        counters = [counter(k) for k in keys]
        ranks = np.zeros(len(keys), np.int64)
        shared: dict = defaultdict(list)
        for row, (c_hi, c_lo, may_collide) in enumerate(counters):
            if may_collide:
                shared[(c_hi, c_lo)].append(row)
        for rows in shared.values():
            for rank, row in enumerate(sorted(rows, key=lambda r: tuple(map(_sort_key, keys[r])))):
                ranks[row] = rank
        hi = np.array([c[0] & (2**64 - 1) for c in counters], np.uint64)
        lo = np.array([c[1] for c in counters], np.uint64)
        z = self.randomness.noise(plan.noise, tag, hi, lo, ranks, threads=1)
        w = np.array([np.nan if v is None else v for v in weights.column("_dp_w").to_pylist()], np.float64)
        return w, np.where(np.isnan(w), 0.0, w) + plan.scale * z

    def remove(self, pairs: pa.Table, keys: pa.Table) -> pa.Table:
        """Pairs whose key is not in `keys` (DP-SIPS Alg. 3 line 9)."""
        gone = set(self._key_tuples(keys))
        return self._take(pairs, [k not in gone for k in self._key_tuples(pairs)])

    def store(self, frame: pa.Table, name: str = "") -> pa.Table:
        return frame

    def empty_keys(self, like: pa.Table) -> pa.Table:
        return like.select(self.keys).slice(0, 0)

    def append(self, stored: pa.Table, keys: pa.Table) -> tuple[pa.Table, int]:
        return self.union(stored, keys), keys.num_rows

    def union(self, first: pa.Table, second: pa.Table) -> pa.Table:
        first = first.select(self.keys)
        return pa.concat_tables([first, second.select(self.keys).cast(first.schema)])

    def output(self, keys: pa.Table) -> pa.Table:
        """The keys under the input's column names, sorted by key (the output contract)."""
        return keys.select(self.keys).sort_by([(k, "ascending") for k in self.keys]).rename_columns(self.key_names)

    def num_rows(self, table: pa.Table) -> int:
        return table.num_rows

    def drop(self, frame: pa.Table) -> None:
        return None
