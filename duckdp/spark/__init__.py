"""duckdp on Apache Spark: the same mechanisms, plans and `Release` over Spark DataFrames.

`duckdp.select(spark, df_or_table, algo=...)`, `duckdp.count_release(spark, ...)` and
`duckdp.Session(spark, ...)` dispatch here when their first argument is a `SparkSession`.
Plans (every σ and T) come from the engine-neutral `Mechanism.plan` and the mechanisms run
unchanged (`mech.run(stages, plan, params)`); only the data stages are written again, with the
DataFrame API (`stages.py`, a `duckdp.stages.base.Stages`; per-key PRF noise in `noise.py`).
pyspark is imported only when a SparkSession is passed.
"""
from __future__ import annotations


def is_spark_session(obj) -> bool:
    """True for a `pyspark.sql.SparkSession` (classic or Connect), without importing pyspark."""
    return any(c.__name__ == "SparkSession" and c.__module__.startswith("pyspark.")
               for c in type(obj).__mro__)
