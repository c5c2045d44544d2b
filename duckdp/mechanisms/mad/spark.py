"""MAD and MAD2R's own stages on Spark: MAD's weighting is the DuckDB template itself (./sql/mad_weights.sql
by `spark.sql`); the others compute, with the DataFrame API, what the template named in their docstring
computes (spec docs/specs/mad-mad2r.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...spark.stages import SparkStages
from ..base import RoundPlan
from . import SCREEN_COLUMNS, screen_exceptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def mad_vectors(engine: SparkStages, kept: DataFrame) -> DataFrame:
    """Stored user vectors with w^u_i = 1/√d_u (sql/mad_vectors.sql; spec §2 step 1, §4)."""
    from pyspark.sql import functions as F

    return engine.store(kept.select("_dp_user", *engine.keys, "_dp_d", (1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw")))


def mad_weights(engine: SparkStages, vectors: DataFrame, plan: RoundPlan) -> DataFrame:
    """MAD stages 1–4 (spec §5): truncate at τ, return excess, reroute f — the DuckDB template
    mad_weights.sql itself, run by `spark.sql` over the vectors (benchmarks/bench_spark_template.py)."""
    x = plan.extra
    return engine.template("mad_weights", {"bounded": vectors},
                           {"min_degree": x.min_degree, "max_degree": x.max_degree, "tau": x.tau,
                            "reroute": x.reroute})


def mad2r_screen(engine: SparkStages, pairs: DataFrame, vectors: DataFrame, plan1: RoundPlan, plan2: RoundPlan,
                 max_contributions: int) -> DataFrame:
    """Round-1 noisy weights ŵ1 on the whole universe (∪S̃_u and the keys of users over Δ0;
    sql/mad2r_universe.sql), MAD2R's decisions by the generic `decide` stage
    with `screen_round1`, and only the exceptions (released, removed or biased) stored."""
    from pyspark.sql import functions as F


    big = pairs.where(F.col("_dp_size") > max_contributions).select(*engine.keys).distinct()
    universe = mad_weights(engine, vectors, plan1).join(big, engine.keys, "full")
    return engine.store(engine.decide(universe, plan1, screen_exceptions(plan1, plan2), SCREEN_COLUMNS))


def mad2r_vectors(engine: SparkStages, pairs: DataFrame, status: DataFrame, max_contributions: int, beta_min: float,
                  beta_max: float) -> DataFrame:
    """Stored round-2 user vectors (sql/mad2r_vectors.sql + mad2r_biased.sql; spec §4, §6): round-2
    pairs re-cut to Δ0, 1/√d for users without a bias below 1, water-filling λ* for the others."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = engine.keys
    b = F.greatest(F.least(F.coalesce(F.col("_dp_beta"), F.lit(1.0)), F.lit(1.0)), F.lit(beta_min))
    user = Window.partitionBy("_dp_user")
    remaining = (pairs.drop("_dp_size").join(status, keys, "left")
                 .where(F.col("_dp_round2").isNull() | F.col("_dp_round2"))
                 .select("_dp_user", *keys, b.alias("_dp_b"))
                 .withColumn("_dp_biased", F.max((F.col("_dp_b") < 1).cast("int")).over(user) == 1))
    kept = engine.truncate(engine.sized(remaining), max_contributions)
    kept = kept.withColumn("_dp_v", F.col("_dp_b") / F.sqrt(F.col("_dp_d")))
    out = ["_dp_user", *keys, "_dp_d", "_dp_v"]
    plain = kept.where(~F.col("_dp_biased")).select(*out, (1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw"),
                                                    "_dp_biased")
    order = user.orderBy(F.col("_dp_v").desc(), *keys)
    v, prev, cap = F.col("_dp_v"), F.col("_dp_prev"), F.col("_dp_cap")
    ordered = (kept.where(F.col("_dp_biased"))
               .withColumn("_dp_r", F.row_number().over(order))
               .withColumn("_dp_tail", F.sum(v * v).over(order.rowsBetween(Window.currentRow,
                                                                             Window.unboundedFollowing)))
               .withColumn("_dp_prev", F.lag(v).over(order))
               .withColumn("_dp_cap", F.lit(beta_max) / F.sqrt(F.col("_dp_d"))))
    room = 1 - (F.col("_dp_r") - 1) * cap * cap          # λ_r when the r−1 largest are capped
    lam = F.when(room > 0, F.sqrt(room / F.col("_dp_tail")))
    valid = (lam * v <= cap * (1 + 1e-9)) & (prev.isNull() | (lam * prev >= cap * (1 - 1e-9)))
    solved = ordered.withColumn("_dp_lambda", F.min(F.when(valid, lam)).over(user))
    biased = solved.select(*out, F.coalesce(F.least(F.col("_dp_lambda") * v, cap),
                                            1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw"), "_dp_biased")
    return engine.store(plain.unionByName(biased))


def mad2r_released(engine: SparkStages, status: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return status.where(F.col("_dp_released")).select(*engine.keys)
