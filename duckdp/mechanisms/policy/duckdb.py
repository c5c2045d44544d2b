"""The sequential policies' own stages on DuckDB (templates in ./sql): data preparation for the numpy
update loop and the histogram's way back to the generic release stage."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...stages import Query
from ...stages.duckdb import DuckDBStages
from ..base import RoundPlan


def policy_pairs(engine: DuckDBStages, counted: bool, max_contributions: int) -> tuple[Query, Query, int]:
    """(pairs with `_dp_n`, items with dense `_dp_item` ids 0..n−1, n): truncated pairs
    [policy_pairs.sql], or GW's row counts, untruncated [gw_pairs.sql]; ids [policy_items.sql]."""
    ctx = engine.ctx
    pairs, items = ctx.temp_table("pairs"), ctx.temp_table("items")
    base = ctx.base_idents()
    if counted:
        ctx.execute("gw_pairs", {"pairs": pairs, "source": base["source"], "user": base["user"],
                                 "key_select": base["key_select"]}, {})
    else:
        kept = engine.truncate(engine.sized(engine.pairs()), max_contributions)
        ctx.execute("policy_pairs", {"pairs": pairs, "kept": kept.sql, "keys": base["keys"]}, kept.params)
    ctx.execute("policy_items", {"items": items, "pairs": pairs, "keys": base["keys"]}, {})
    return engine.table(pairs), engine.table(items), ctx.scalar(f"SELECT count(*) FROM {items}")


def count_users(engine: DuckDBStages, pairs: Query) -> int:
    """Distinct users of a pairs frame (the progress bar's total)."""
    return engine.ctx.scalar(f"SELECT count(DISTINCT _dp_user) FROM ({pairs.sql})")


def policy_lists(engine: DuckDBStages, pairs: Query, items: Query, batch_users: int) -> pa.RecordBatchReader:
    """Arrow record batches of one list column of item ids per user, in keyed-random user order
    [policy_lists.sql]; the reader has .close()."""
    ctx = engine.ctx
    params = {"order_salt": ctx.randomness.salt(), "tie_salt": ctx.randomness.salt()}
    return ctx.reader("policy_lists", {"pairs": engine.table_name(pairs), "items": engine.table_name(items),
                                       "keys": ctx.key_aliases}, params, batch_users)


def policy_release(engine: DuckDBStages, weights: np.ndarray, items: Query, plan: RoundPlan) -> Query:
    """Noise + threshold over the sequential histogram's support (weights by item id joined back to
    the keys [policy_weights.sql], then the generic release stage)."""
    view = engine.ctx.register("weights", pa.table({"_dp_item": np.arange(len(weights), dtype=np.int64),
                                                    "_dp_w": weights}))
    weighted = engine.query("policy_weights", {"weights": view, "items": engine.table_name(items),
                                               "keys": engine.ctx.key_aliases})
    return engine.release(weighted, plan)
