"""Private Count Release's own stage on DuckDB (template in ./sql; the mechanism: ./__init__.py)."""
from __future__ import annotations

import pyarrow as pa

from ...stages.duckdb import DuckDBStages


def top_counts(engine: DuckDBStages, top: int) -> pa.Table:
    """The `top` largest distinct-user counts (keys, `_dp_count`), Arrow, ties in keyed-hash order
    [pcr_top_counts.sql]."""
    ctx = engine.ctx
    idents = {k: v for k, v in ctx.base_idents().items() if k != "key_output"}
    return ctx.arrow("pcr_top_counts", idents, {"top": top, "tie_salt": ctx.randomness.salt()})
