"""Deterministic synthetic (user, item) data following the DP-SIPS recipe, for demos and tests.

Swanberg, Desfontaines, Haney (DP-SIPS) §5.1: user set sizes ~ Pareto(scale 10, shape 1.16)
capped at 10,000; items drawn i.i.d. from a zeta(1.1) distribution (so sets may repeat items;
mechanisms deduplicate). The same (rows, seed) always gives the same table.
"""
from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from .templates import quote_ident


def synthetic_arrow(rows: int, seed: int = 0, *, scale: float = 10.0, shape: float = 1.16,
                    cap: int = 10_000, zipf: float = 1.1, string_items: bool = False) -> pa.Table:
    """An Arrow table (user_id BIGINT, item BIGINT or VARCHAR) with exactly `rows` rows."""
    if rows < 0:
        raise ValueError("rows must be >= 0")
    rng = np.random.default_rng(seed)
    parts = []
    total = 0
    while total < rows:
        s = np.minimum(np.floor(scale * (1.0 + rng.pareto(shape, size=max(1024, (rows - total) // 40)))), cap)
        s = s.astype(np.int64)
        parts.append(s)
        total += int(s.sum())
    sizes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    ends = np.cumsum(sizes)
    n_users = int(np.searchsorted(ends, rows) + 1) if rows else 0
    sizes = sizes[:n_users].copy()
    if n_users:
        sizes[-1] -= int(ends[n_users - 1] - rows)
    users = np.repeat(np.arange(n_users, dtype=np.int64), sizes)
    items = rng.zipf(zipf, size=rows).astype(np.int64)
    item_col = pa.array(np.char.add("item_", items.astype(str))) if string_items else pa.array(items)
    return pa.table({"user_id": pa.array(users), "item": item_col})


def create_synthetic(con: duckdb.DuckDBPyConnection, name: str, rows: int, seed: int = 0, *, string_items: bool = False,
                     chunk: int = 5_000_000) -> None:
    """Create (or replace) table `name` on `con` with synthetic data; built in chunks to bound memory."""
    table = synthetic_arrow(rows, seed, string_items=string_items)
    target = quote_ident(name)
    con.execute(f"CREATE OR REPLACE TABLE {target} (user_id BIGINT, item {'VARCHAR' if string_items else 'BIGINT'})")
    for start in range(0, table.num_rows, chunk):
        part = table.slice(start, chunk)
        con.register("_duckdp_synthetic_chunk", part)
        try:
            con.execute(f"INSERT INTO {target} SELECT * FROM _duckdp_synthetic_chunk")
        finally:
            con.unregister("_duckdp_synthetic_chunk")


def demo_table(con: duckdb.DuckDBPyConnection, name: str = "demo_reviews") -> str:
    """The built-in demo dataset: 200,000 (user, word) rows over ~10k users, string items."""
    create_synthetic(con, name, 200_000, seed=2024, string_items=True)
    return name
