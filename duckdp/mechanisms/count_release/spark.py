"""Private Count Release's own stage on Spark (the DuckDB template: ./sql; the mechanism: ./__init__.py)."""
from __future__ import annotations

import pyarrow as pa

from ...spark.stages import SparkStages


def top_counts(engine: SparkStages, top: int) -> pa.Table:
    """The `top` largest distinct-user counts (keys, `_dp_count`), ties in keyed-hash order
    (sql/pcr_top_counts.sql)."""
    from pyspark.sql import functions as F

    tie = F.xxhash64(F.lit(engine.randomness.salt()), *[F.col(k) for k in engine.keys])
    return (engine.pairs().groupBy(*engine.keys).agg(F.count(F.lit(1)).alias("_dp_count"))
            .orderBy(F.col("_dp_count").desc(), tie, *engine.keys).limit(top).toArrow())
