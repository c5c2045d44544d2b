"""Adaptive SIPS's own stages on Spark DataFrames: each function computes what the DuckDB template named
in its docstring computes (./sql; spec docs/specs/adaptive-sips.md)."""
from __future__ import annotations

from ...spark.stages import SparkStages
from . import STATE_COLUMNS, state_rule


def remaining(engine: SparkStages, pairs, state):
    """R_u with each key's level: all pairs at level 1 in round 1, else the pairs whose key is in play."""
    from pyspark.sql import functions as F

    if state is None:
        return pairs.withColumn("_dp_level", F.lit(1.0))
    return pairs.join(state.where(F.col("_dp_level") > 0).select(*engine.keys, "_dp_level"), engine.keys)


def vectors(engine: SparkStages, kept, cap: float):
    """Each user's capped unit-norm vector over R̃_u (sql/adaptive_sips_vectors.sql): level-1 entries
    min(1/√Σl², c/√d), lower levels scaled to the remaining norm, every entry capped at c/√d."""
    from pyspark.sql import functions as F

    lvl, d = F.col("_dp_level"), F.col("_dp_d")
    stats = kept.groupBy("_dp_user").agg(
        F.sum(lvl * lvl).alias("_dp_ss"), F.count(F.when(lvl >= 1.0, 1)).alias("_dp_nhi"),
        F.coalesce(F.sum(F.when(lvl < 1.0, lvl * lvl)), F.lit(0.0)).alias("_dp_sslo"))
    capped = F.lit(cap) / F.sqrt(d)
    scaled = kept.join(stats, "_dp_user").withColumn("_dp_hi", F.least(1.0 / F.sqrt(F.col("_dp_ss")), capped))
    low = F.least(lvl * F.sqrt(F.greatest(1.0 - F.col("_dp_nhi") * F.col("_dp_hi") * F.col("_dp_hi"), F.lit(0.0))
                               / F.col("_dp_sslo")), capped)
    return scaled.select("_dp_user", *engine.keys, F.when(lvl >= 1.0, F.col("_dp_hi")).otherwise(low).alias("_dp_x"))


def weights(engine: SparkStages, vectors):
    from pyspark.sql import functions as F

    return vectors.groupBy(*engine.keys).agg(F.sum("_dp_x").alias("_dp_w"))


def state(engine: SparkStages, remaining, vectors, state, plan, params: dict, index: int):
    """Noise on every key of ∪R_u (sql/adaptive_sips_universe.sql), the mechanism's rule
    (`next_state`) by the generic `decide` stage → stored state (keys in play or released
    this round, plus those released earlier) and the number released this round."""
    from pyspark.sql import functions as F

    universe = remaining.select(*engine.keys).distinct().join(weights(engine, vectors), engine.keys, "left")
    decided = engine.store(engine.decide(universe, plan, state_rule(plan, params), STATE_COLUMNS))
    count = decided.where(F.col("_dp_released")).count()
    new = decided.select(*engine.keys, "_dp_level",
                         F.when(F.col("_dp_released"), F.lit(index)).cast("int").alias("_dp_round"))
    if state is not None:           # the keys earlier rounds released stay in the output
        new = new.unionByName(state.where(F.col("_dp_round").isNotNull()))
    return engine.store(new), int(count)


def released(engine: SparkStages, state):
    from pyspark.sql import functions as F

    return state.where(F.col("_dp_round").isNotNull()).select(*engine.keys)
