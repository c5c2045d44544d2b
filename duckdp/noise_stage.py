"""The noise + threshold stage on DuckDB, shared by every mechanism.

    release_keys(ctx, weights_sql, weights_params, plan, key_output) -> pa.Table
        the keys whose weight + plan.scale · noise ≥ plan.threshold (plan: a RoundPlan, or any
        object with .noise, .scale, .threshold), with columns as `key_output` selects them.
    scan_noisy(ctx, weights_sql, weights_params, kind, scale, choose, key_output, sink=None) -> pa.Table
        the general step: `choose(weights, noisy)` picks rows (and may add columns) batch by
        batch, for stages that decide more than "over the threshold" (MAD2R's screen); with
        `sink`, the kept batches go to it as they are decided (the engine's `decide` streams them
        into DuckDB: adaptive SIPS's state can hold most keys).
    noisy_weights(ctx, weights_sql, weights_params, kind, scale) -> NoisyWeights
        every key with its weight and noisy weight in memory (tests and small inputs).

`weights_sql` selects the internal key columns `_dp_k0, …` and `_dp_w` (one row per distinct
key). How: the weights query, with each key's PRF counter (duckdp/counters.py), is streamed from
DuckDB as Arrow record batches; each batch gets one vectorised noise pass (duckdp/prf.py) on a
thread pool sized to DuckDB's `threads`, and only the rows `choose` keeps (the released keys) are
held. Memory stays bounded by the batches in flight plus the output at any input size.

Counters (duckdp/counters.py): integer keys, and key ids (unseeded multi-round mechanisms run on
them: DuckDBStages.round_pairs), are their own injective counters, computed from the key column
per batch (counters.counter_arrays; HUGEINT keys: in the query).
Other keys (strings, composite keys, …) take one of two paths:
- unseeded (every private release): the counter is the key's position in this round's stream,
  (0, offset of its batch + row in batch), handed out in the order batches arrive. Each key occurs
  once in a round's weights, so positions are distinct: injective, as the PRF argument needs
  (counters.py), at no cost in SQL. The position depends on DuckDB's scan order and threads, which
  changes nothing: for every assignment the noise is i.i.d., and the output is sorted by key.
- seeded (tests, demos): a digest of the key, materialised once in a TEMP table so collisions among
  the keys present can be ranked (sql/noise_scan_ranked.sql), so the same seed gives the same
  release at any thread count and batch order, and on Spark.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .counters import counter_arrays, counter_sql
from .prf import noise

if TYPE_CHECKING:
    from .run import RunContext
    from .stages.base import NoisePlan

BATCH_ROWS = 1 << 18        # rows per Arrow batch from DuckDB (bounded memory, enough work per task)

# choose(weights, noisy) -> (mask of rows to keep, {column: values} to add to the kept rows)
Chooser = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, dict[str, np.ndarray]]"]


@dataclass
class NoisyWeights:
    """One noised round in memory: every key (`key_output` columns), its weight and noisy weight."""

    keys: pa.Table
    weights: np.ndarray        # NaN where `_dp_w` is NULL
    noisy: np.ndarray          # weight (0 where NULL) + scale · noise


def _column(batch: pa.RecordBatch, i: int, dtype: type[np.generic]) -> np.ndarray:
    col = batch.column(i)
    if col.null_count:
        return col.to_numpy(zero_copy_only=False).astype(dtype)
    return col.to_numpy()


def scan_noisy(ctx: RunContext, weights_sql: str, weights_params: dict, kind: str, scale: float, choose: Chooser,
               key_output: str, sink: Callable[[pa.RecordBatch], None] | None = None,
               round_tag: int | None = None) -> pa.Table:
    """Add `scale` · fresh standard `kind` noise to every weight; the rows `choose` keeps, as a table
    of the `key_output` columns and the columns `choose` adds. With `sink`, each kept batch (at least
    one, maybe empty: the schema) goes to `sink` as soon as it is decided and nothing is held here;
    the table returned is then empty. `round_tag`: a round tag the caller drew (Randomness.next_round)
    to draw more of the same round's noise later; by default a fresh one."""
    hi, lo, may_collide = counter_sql(ctx.key_types)
    positional = may_collide and not ctx.randomness.seeded   # stream positions (module docstring): no SQL
    from_key = counter_arrays(ctx.key_types)                 # integer keys and ids: computed from the key column
    nkeys = ctx.key_count
    if round_tag is None:
        round_tag = ctx.randomness.next_round()
    table = None
    if may_collide and not positional:   # digest counters: materialise once, rank collisions, then stream
        table = ctx.temp_table("noise")
        ctx.execute("noise_weights", {"target": table, "weighted": weights_sql, "keys": ctx.key_aliases,
                                      "counter_hi": hi, "counter_lo": lo}, weights_params)
        text, bound = ctx.render("noise_scan_ranked", {"table": table, "keys": ctx.key_aliases, "order": "",
                                                       "columns": f"{key_output}, t._dp_w, t._dp_chi, t._dp_clo"}, {})
    else:
        counters = "" if positional or from_key else f", {hi} AS _dp_chi, {lo} AS _dp_clo"
        text, bound = ctx.render("noise_scan", {"weighted": weights_sql, "key_output": key_output,
                                                "counters": counters}, weights_params)
    threads = ctx.threads                                     # DuckDB's setting: the noise pool follows it
    key = ctx.randomness.key

    def work(batch: pa.RecordBatch, offset: int) -> pa.RecordBatch:
        w = _column(batch, nkeys, np.float64)
        if positional:
            hi_col = np.zeros(batch.num_rows, np.uint64)
            lo_col = np.arange(offset, offset + batch.num_rows, dtype=np.uint64)
            ranks = None
        elif from_key:
            hi_col, lo_col = from_key(batch.column(0).to_numpy())    # keys are never NULL (source.check_nulls)
            ranks = None
        else:
            hi_col, lo_col = _column(batch, nkeys + 1, np.int64), _column(batch, nkeys + 2, np.int64)
            ranks = _column(batch, nkeys + 3, np.int64) if may_collide else None
        noisy = noise(kind, key, round_tag, hi_col, lo_col, ranks, threads=1)    # a new array: scaled in place
        noisy *= scale
        noisy += np.where(np.isnan(w), 0.0, w) if batch.column(nkeys).null_count else w   # weight (0 if NULL) + scale·z
        mask, extra = choose(w, noisy)
        keep = pa.array(mask, pa.bool_())
        cols = [batch.column(i).filter(keep) for i in range(nkeys)]
        names = batch.schema.names[:nkeys]
        for name, values in extra.items():
            cols.append(pa.array(np.asarray(values)[mask]))
            names.append(name)
        return pa.RecordBatch.from_arrays(cols, names=names)

    try:
        reader = ctx.con.sql(text, params=bound).to_arrow_reader(BATCH_ROWS)
        out: list[pa.RecordBatch] = []
        emit = out.append if sink is None else sink
        with ThreadPoolExecutor(threads) as pool:       # DuckDB fills the next batch while numpy works
            pending: deque = deque()
            offset = 0                                  # rows handed out so far: positional counters
            for batch in reader:
                pending.append(pool.submit(work, batch, offset))
                offset += batch.num_rows
                while len(pending) > 2 * threads:
                    emit(pending.popleft().result())
            for future in pending:
                emit(future.result())
        if not out and (sink is None or offset == 0):   # no batch: an empty one carries the schema
            emit(work(pa.RecordBatch.from_pylist([], schema=reader.schema), 0))
        return pa.Table.from_batches(out) if sink is None else pa.table({})
    finally:
        if table is not None:
            ctx.con.execute(f"DROP TABLE IF EXISTS temp.main.{table}")


def noisy_weights(ctx: RunContext, weights_sql: str, weights_params: dict, kind: str, scale: float,
                  key_output: str | None = None) -> NoisyWeights:
    """Every key with its weight and noisy weight, in memory (scan_noisy keeping all rows)."""
    def everything(w: np.ndarray, noisy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return np.ones(w.size, bool), {"_dp_w": w, "_dp_noisy": noisy}

    t = scan_noisy(ctx, weights_sql, weights_params, kind, scale, everything, key_output or ctx.key_output)
    nkeys = ctx.key_count
    return NoisyWeights(t.select(list(range(nkeys))), t.column(nkeys).to_numpy(), t.column(nkeys + 1).to_numpy())


def release_keys(ctx: RunContext, weights_sql: str, weights_params: dict, plan: NoisePlan, key_output: str) -> pa.Table:
    """Keys whose weight plus `plan.scale` · fresh `plan.noise` noise is at least `plan.threshold`."""
    threshold = plan.threshold

    def over(w: np.ndarray, noisy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return noisy >= threshold, {}

    return scan_noisy(ctx, weights_sql, weights_params, plan.noise, plan.scale, over, key_output)
