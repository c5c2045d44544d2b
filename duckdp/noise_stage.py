"""The noise + threshold stage on DuckDB, shared by every mechanism.

    release_keys(ctx, weights_sql, weights_params, plan, key_output) -> pa.Table
        the keys whose weight + plan.scale · noise ≥ plan.threshold (plan: a RoundPlan, or any
        object with .noise, .scale, .threshold), with columns as `key_output` selects them.
    noisy_weights(ctx, weights_sql, weights_params, kind, scale) -> NoisyWeights
        the lower-level step: a TEMP table of the weights and their noisy values as numpy arrays,
        for stages that decide more than "over the threshold" (MAD2R's screen); `.keys(rows, …)`
        brings the keys of chosen rows back.

`weights_sql` selects the internal key columns `_dp_k0, …` and `_dp_w` (one row per distinct
key). How: the weights go into a TEMP table with each key's PRF counter (duckdp/counters.py), are
fetched as numpy (weights + counters + rowid), get one vectorised noise pass (duckdp/prf.py,
chunked on a thread pool), are thresholded in numpy, and the released rows' keys come back by
rowid — not by scan order, which DuckDB only keeps under `preserve_insertion_order`. Noise depends
on (release key, round, counter, collision rank) only, so seeded releases are identical at any
thread count. This replaces the per-chunk Python UDF, which serialised on the GIL.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .counters import counter_sql
from .templates import quote_ident


@dataclass
class NoisyWeights:
    """One noised round: its TEMP table, and per row (same order) rowid, weight and noisy weight."""

    ctx: object
    table: str
    rows: np.ndarray
    weights: np.ndarray        # NaN where `_dp_w` is NULL
    noisy: np.ndarray          # weight (0 where NULL) + scale · noise

    def keys(self, rows: np.ndarray, key_output: str) -> pa.Table:
        """The keys of `rows` (rowids of this table) as `key_output` selects them."""
        ctx = self.ctx
        view = f"_duckdp_{ctx.run_id}_rows"
        ctx.con.register(view, pa.table({"_dp_row": pa.array(rows, pa.int64())}))
        try:
            return ctx.arrow("noise_rows", {"table": self.table, "rows": quote_ident(view),
                                            "key_output": key_output}, {})
        finally:
            ctx.con.unregister(view)

    def drop(self) -> None:
        self.ctx.con.execute(f"DROP TABLE IF EXISTS temp.main.{self.table}")


def collision_ranks(ctx, table: str, rows: np.ndarray) -> np.ndarray | None:
    """Rank of each row among rows sharing its counter (0 for the rest), or None if no counter repeats."""
    dups = ctx.arrow("noise_collisions", {"table": table, "keys": ctx.key_aliases}, {})
    if dups.num_rows == 0:
        return None
    order = np.argsort(rows, kind="stable")
    where = order[np.searchsorted(rows, dups.column("_dp_row").to_numpy(), sorter=order)]
    ranks = np.zeros(rows.size, dtype=np.int64)
    ranks[where] = dups.column("_dp_rank").to_numpy()
    return ranks


def noisy_weights(ctx, weights_sql: str, weights_params: dict, kind: str, scale: float) -> NoisyWeights:
    """Materialise the weights with counters and add `scale` · standard `kind` noise in numpy."""
    hi, lo, may_collide = counter_sql(ctx.source.key_types)
    table = ctx.temp_table("noise")
    ctx.execute("noise_weights", {"target": table, "weighted": weights_sql, "keys": ctx.key_aliases,
                                  "counter_hi": hi, "counter_lo": lo}, weights_params)
    data = ctx.con.sql(f"SELECT rowid AS _dp_row, _dp_w, _dp_chi, _dp_clo FROM {table}").to_arrow_table()
    rows = data.column("_dp_row").to_numpy()
    w = data.column("_dp_w")
    weights = w.to_numpy() if w.null_count == 0 else w.to_numpy(zero_copy_only=False).astype(np.float64)
    ranks = collision_ranks(ctx, table, rows) if may_collide else None
    (threads,), = ctx.con.sql("SELECT current_setting('threads')").fetchall()    # DuckDB's, for the pool too
    z = ctx.randomness.noise(kind, ctx.randomness.next_round(), data.column("_dp_chi").to_numpy(),
                             data.column("_dp_clo").to_numpy(), ranks, int(threads))
    noisy = np.where(np.isnan(weights), 0.0, weights) + scale * z
    return NoisyWeights(ctx, table, rows, weights, noisy)


def release_keys(ctx, weights_sql: str, weights_params: dict, plan, key_output: str) -> pa.Table:
    """Keys whose weight plus `plan.scale` · fresh `plan.noise` noise is at least `plan.threshold`."""
    nw = noisy_weights(ctx, weights_sql, weights_params, plan.noise, plan.scale)
    try:
        return nw.keys(nw.rows[nw.noisy >= plan.threshold], key_output)
    finally:
        nw.drop()
