"""Private GROUP BY's per-key noise: exact discrete Gaussian draws keyed by each key's PRF counter, and the
keys="threshold" rule built on them (spec docs/specs/private-group-by.md §2.6, §4.2).

A module of its own because Spark's Python workers import it: the rule runs on the executors, pickled by
reference to this module, so it imports only numpy, pyarrow, the PRF and the samplers (with mpmath for their tail
probabilities; no planning code, no scipy).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .discrete import decided_below, discrete_gaussian_array, thresholded_array
from .draw_pool import DrawPool
from .rng import Randomness

NOISY_USERS = "_dp_users"    # the column the threshold rule appends: each kept key's noisy user count (int64)


def counters(table: pa.Table | pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
    """The keys' PRF counters (`_dp_chi`, `_dp_clo`) of an Arrow table or batch as uint64 arrays."""
    hi = table.column("_dp_chi").to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
    lo = table.column("_dp_clo").to_numpy(zero_copy_only=False).astype(np.uint64)
    return hi, lo


def collision_ranks(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Collision rank of each key among keys with the same counter, in the (sorted) key order (counters.py)."""
    n = hi.size
    order = np.lexsort((np.arange(n), lo, hi))
    same = np.zeros(n, dtype=bool)
    same[1:] = (hi[order][1:] == hi[order][:-1]) & (lo[order][1:] == lo[order][:-1])
    starts = np.maximum.accumulate(np.where(same, 0, np.arange(n)))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n) - starts
    return ranks


def noise(randomness: Randomness, tag: int, hi: np.ndarray, lo: np.ndarray, sigma: float,
          ranks: np.ndarray | None = None, pool: DrawPool | None = None,
          floors: np.ndarray | None = None) -> np.ndarray:
    """Exact N_Z(0, σ²) per key from K[b"aggm", tag, rank] keyed by its counter (CKS20 Alg. 3; spec §2.6):
    a function of (K, tag, counter, rank) only, independent of other keys and of row order. `ranks`: the keys'
    collision ranks where the caller has them (a stream of keys: `Threshold`), else `collision_ranks` of these keys.
    `pool`: worker processes to draw on (the same draws), else drawn here. `floors`: only whether each draw reaches
    its floor, and the draw where it does (`discrete.thresholded_array`, floor − 1 where not): the keys decided by
    their first bits (`decided_below`, nearly every key far below its floor) are settled here, the rest drawn."""
    ranks = collision_ranks(hi, lo) if ranks is None else ranks
    out = np.zeros(hi.size, dtype=np.int64) if floors is None else floors - 1
    for r in np.unique(ranks):
        rows = np.flatnonzero(ranks == r)
        key = randomness.key.derive(b"aggm", tag, int(r))
        if floors is None:
            out[rows] = (discrete_gaussian_array if pool is None else pool.draw)(key, hi[rows], lo[rows], sigma)
            continue
        rows = rows[~decided_below(key, hi[rows], lo[rows], sigma, floors[rows])]
        if rows.size:
            out[rows] = (thresholded_array(key, hi[rows], lo[rows], sigma, floors[rows]) if pool is None
                         else pool.draw(key, hi[rows], lo[rows], sigma, floors[rows]))
    return out


@dataclass(frozen=True)
class Threshold:
    """keys="threshold" (spec §4.2), the `ThresholdRule` run on each batch of candidate keys (`user_counts`' columns:
    each key's counter, c and collision rank): the keys whose c plus exact N_Z(0, σ²) (round `tag`) reaches the
    threshold, with their measures (the same kept pairs) and that noisy c (the users metric) as `NOISY_USERS`. Each
    key's draw is a function of (K, tag, counter, rank) only, so any batching — DuckDB's stream on the driver, drawn on
    its `pool` of worker processes,
    Spark's partitions on the executors (the key travels with the rule, as in duckdp/spark/noise.py) — draws the
    same noise as one array of every candidate."""

    sigma: float
    threshold: float
    randomness: Randomness
    tag: int

    def __call__(self, batch: pa.RecordBatch, pool: DrawPool | None = None) -> pa.RecordBatch:
        hi, lo = counters(batch)
        c = batch.column("_dp_c").to_numpy(zero_copy_only=False).astype(np.int64)
        ranks = batch.column("_dp_rank").to_numpy(zero_copy_only=False).astype(np.int64)
        floors = math.ceil(self.threshold) - c                  # c + Z ≥ T ⇔ Z ≥ ⌈T⌉ − c (Z an integer)
        noisy_c = c + noise(self.randomness, self.tag, hi, lo, self.sigma, ranks, pool, floors)      # spec §4.2
        keep = pa.array(noisy_c >= self.threshold)
        return batch.append_column(pa.field(NOISY_USERS, pa.int64(), nullable=False),
                                   pa.array(noisy_c, pa.int64())).filter(keep)
