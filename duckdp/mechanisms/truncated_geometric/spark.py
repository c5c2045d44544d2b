"""The truncated geometric mechanism's own stage on Spark (the DuckDB template: ./sql)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ...spark.noise import noised
from ...spark.stages import SparkStages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def geometric_release(engine: SparkStages, weights: DataFrame, keep_prob: np.ndarray) -> DataFrame:
    """Keys kept iff a keyed uniform u ≤ π(n), as on DuckDB (sql/truncated_geometric.sql)."""
    from pyspark.sql import functions as F

    probs = engine.spark.createDataFrame(pa.table({"_dp_n": pa.array(np.arange(1, len(keep_prob) + 1), pa.int64()),
                                                 "_dp_p": pa.array(keep_prob, pa.float64())}))
    drawn = noised(engine, weights, "uniform", "_dp_u")
    return (drawn.withColumn("_dp_n", F.round(F.col("_dp_w")).cast("long"))
            .join(F.broadcast(probs), "_dp_n", "left")
            .where(F.col("_dp_u") <= F.coalesce(F.col("_dp_p"), F.lit(1.0))).select(*engine.keys))
