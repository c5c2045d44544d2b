"""Adaptive SIPS's own stages on Spark: steps 3–4 are the DuckDB templates themselves (./sql by
`spark.sql`); the others compute, with the DataFrame API, what the template named in their docstring
computes (spec docs/specs/adaptive-sips.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...spark.stages import SparkStages
from ..base import Params, RoundPlan
from . import STATE_COLUMNS, state_rule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def remaining(engine: SparkStages, pairs: DataFrame, state: DataFrame | None) -> DataFrame:
    """R_u with each key's level: all pairs at level 1 in round 1, else the pairs whose key is in play."""
    from pyspark.sql import functions as F

    if state is None:
        return pairs.withColumn("_dp_level", F.lit(1.0))
    return pairs.join(state.where(F.col("_dp_level") > 0).select(*engine.keys, "_dp_level"), engine.keys)


def vectors(engine: SparkStages, kept: DataFrame, cap: float) -> DataFrame:
    """Step 3, each user's capped unit-norm vector over R̃_u: the DuckDB template
    adaptive_sips_vectors.sql itself, run by `spark.sql` (benchmarks/bench_spark_template.py)."""
    return engine.template("adaptive_sips_vectors", {"kept": kept}, {"cap": cap}, subqueries=("kept",))


def weights(engine: SparkStages, vectors: DataFrame) -> DataFrame:
    """Step 4, w_i = Σ_u x_ui over ∪R̃_u: the DuckDB template adaptive_sips_weights.sql, run by `spark.sql`."""
    return engine.template("adaptive_sips_weights", {"vectors": vectors}, {}, subqueries=("vectors",))


def state(engine: SparkStages, remaining: DataFrame, vectors: DataFrame, state: DataFrame | None, plan: RoundPlan,
          params: Params, index: int) -> tuple[DataFrame, int]:
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


def released(engine: SparkStages, state: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return state.where(F.col("_dp_round").isNotNull()).select(*engine.keys)
