"""duckdp on Apache Spark: the same mechanisms, plans and `Release` over Spark DataFrames.

`duckdp.select(spark, df_or_table, algo=...)`, `duckdp.count_release(spark, ...)` and
`duckdp.Session(spark, ...)` dispatch here when their first argument is a `SparkSession`.
Plans (every σ and T) come from the engine-neutral `Mechanism.plan`; only the data stages
(pairs → truncate → weights → noise + threshold → remove) are written again, with the DataFrame API
(`stages.py`, the stage library's engine interface; per-key noise in `noise.py`), and composed
by `mechanisms.py` exactly as `Mechanism.run` composes them. pyspark is imported only when a
SparkSession is passed.
"""
from __future__ import annotations


def is_spark_session(obj) -> bool:
    """True for a `pyspark.sql.SparkSession` (classic or Connect), without importing pyspark."""
    return any(c.__name__ == "SparkSession" and c.__module__.startswith("pyspark.")
               for c in type(obj).__mro__)
