"""MAD and MAD2R on Spark (mechanisms/mad.py; spec specs/mad-mad2r.md), stage by stage as the
DuckDB templates named in each docstring, with the plans' σ, T, τ, f and biases unchanged."""
from __future__ import annotations

import pyarrow as pa

from ..mechanisms.base import Round
from . import stages
from .noise import standard_draws
from .run import SparkRun


def unbiased_vectors(pairs, keys, max_contributions: int, salt: int):
    """Kept (user, key) pairs with d_u and w^u_i = 1/√d_u (sql/mad_bounded.sql; spec §2 step 1, §4)."""
    from pyspark.sql import functions as F

    kept = stages.truncate(pairs, keys, max_contributions, salt)
    return kept.withColumn("_dp_uw", 1.0 / F.sqrt(F.col("_dp_d")))


def weights(bounded, keys, extra):
    """MAD's pre-noise weights `_dp_w` over user vectors (sql/mad_weights.sql; spec §5 stages 1–4)."""
    from pyspark.sql import functions as F

    d, uw = F.col("_dp_d"), F.col("_dp_uw")
    adaptive = d.between(extra["min_degree"], extra["max_degree"])
    tau = F.lit(extra["tau"])
    initial = bounded.where(adaptive).groupBy(*keys).agg(F.sum(uw / F.sqrt(d)).alias("_dp_init"))
    truncated = (initial.where(F.col("_dp_init") > tau)
                 .select(*keys, ((F.col("_dp_init") - tau) / F.col("_dp_init")).alias("_dp_ratio")))
    excess = (bounded.where(adaptive).join(truncated, keys).groupBy("_dp_user")
              .agg(F.sum(F.col("_dp_ratio") * uw / F.sqrt(d)).alias("_dp_e")))
    rerouted = F.when(adaptive, F.lit(extra["reroute"]) * F.coalesce(F.col("_dp_e"), F.lit(0.0)) * uw
                      + (1 - 1 / F.sqrt(d)) * uw).otherwise(uw)
    return (bounded.join(excess, "_dp_user", "left").groupBy(*keys)
            .agg((F.least(F.coalesce(F.sum(F.when(adaptive, uw / F.sqrt(d))), F.lit(0.0)), tau)
                  + F.sum(rerouted)).alias("_dp_w")))


def sized_pairs(run: SparkRun):
    """The input's distinct pairs with each user's key count `_dp_size`, cached (sql/mad_pairs.sql)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    return run.cache(run.pairs().withColumn("_dp_size", F.count(F.lit(1)).over(Window.partitionBy("_dp_user"))))


def run_mad(run: SparkRun, plan, params):
    """MAD (spec §5, Alg. 3): one round of adaptive weights, Basic's noise and threshold."""
    (rp,) = plan
    bounded = unbiased_vectors(run.pairs(), run.keys, params["max_contributions"], run.randomness.salt())
    w = weights(bounded, run.keys, rp.extra)
    table = run.collect(stages.noise_threshold(w, run.keys, rp.noise, rp.scale, rp.threshold, run.randomness))
    return table, [Round.from_plan(0, rp, table.num_rows)]


def screen(run: SparkRun, pairs, weighted, plan1, plan2, max_contributions: int):
    """Round-1 noisy weights and round-2 preprocessing: the exceptions only (sql/mad2r_screen.sql;
    spec §6). ŵ1 covers ∪S̃_u plus the keys of users over Δ0, every decision is a function of ŵ1."""
    from pyspark.sql import functions as F

    big = pairs.where(F.col("_dp_size") > max_contributions).select(*run.keys).distinct()
    noised = standard_draws(weighted.join(big, run.keys, "full"), run.keys, plan1.noise, run.randomness)
    noisy = F.coalesce(F.col("_dp_w"), F.lit(0.0)) + F.lit(plan1.scale) * F.col("_dp_z")
    released = F.col("_dp_w").isNotNull() & (noisy >= F.lit(plan1.threshold))
    lower, tau2 = F.lit(plan2.extra["lower"]), F.lit(plan2.extra["tau"])
    decided = noised.select(
        *run.keys, released.alias("_dp_released"),
        (~released & (noisy + F.lit(plan2.extra["upper"]) >= F.lit(plan2.threshold))).alias("_dp_round2"),
        F.when(noisy - lower > tau2, tau2 / (noisy - lower)).otherwise(F.lit(1.0)).alias("_dp_beta"))
    return run.cache(decided.where(~F.col("_dp_round2") | (F.col("_dp_beta") < 1)))


def biased_vectors(run: SparkRun, pairs, status, extra, max_contributions: int):
    """Round-2 user vectors (sql/mad2r_bounded.sql + mad2r_biased.sql; spec §4, §6): round-2 pairs
    re-cut to Δ0, 1/√d for users without a bias below 1, water-filling λ* for the others."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = run.keys
    b = F.greatest(F.least(F.coalesce(F.col("_dp_beta"), F.lit(1.0)), F.lit(1.0)), F.lit(extra["beta_min"]))
    remaining = (pairs.join(status, keys, "left").where(F.col("_dp_round2").isNull() | F.col("_dp_round2"))
                 .select("_dp_user", *keys, b.alias("_dp_b"))
                 .withColumn("_dp_biased", F.max((F.col("_dp_b") < 1).cast("int")).over(Window.partitionBy("_dp_user")) == 1))
    kept = stages.truncate(remaining, keys, max_contributions, run.randomness.salt(), ("_dp_b", "_dp_biased"))
    kept = kept.withColumn("_dp_v", F.col("_dp_b") / F.sqrt(F.col("_dp_d")))
    plain = kept.where(~F.col("_dp_biased")).select("_dp_user", *keys, "_dp_d", (1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw"))
    user = Window.partitionBy("_dp_user")
    order = user.orderBy(F.col("_dp_v").desc(), *keys)
    cap = F.lit(extra["beta_max"]) / F.sqrt(F.col("_dp_d"))
    r, v, prev = F.col("_dp_r"), F.col("_dp_v"), F.col("_dp_prev")
    ordered = (kept.where(F.col("_dp_biased"))
               .withColumn("_dp_r", F.row_number().over(order))
               .withColumn("_dp_tail", F.sum(v * v).over(order.rowsBetween(Window.currentRow, Window.unboundedFollowing)))
               .withColumn("_dp_prev", F.lag(v).over(order))
               .withColumn("_dp_cap", cap))
    room = 1 - (r - 1) * F.col("_dp_cap") * F.col("_dp_cap")
    lam = F.when(room > 0, F.sqrt(room / F.col("_dp_tail")))
    valid = (lam * v <= F.col("_dp_cap") * (1 + 1e-9)) & (prev.isNull() | (lam * prev >= F.col("_dp_cap") * (1 - 1e-9)))
    solved = ordered.withColumn("_dp_lambda", F.min(F.when(valid, lam)).over(user))
    biased = solved.select("_dp_user", *keys, "_dp_d",
                           F.coalesce(F.least(F.col("_dp_lambda") * v, F.col("_dp_cap")),
                                      1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw"))
    return plain.unionByName(biased)


def run_mad2r(run: SparkRun, plan, params):
    """MAD2R (spec §6, Alg. 4): unbiased MAD screen, then biased MAD on what round 1 left."""
    from pyspark.sql import functions as F

    plan1, plan2 = plan
    d0 = params["max_contributions"]
    pairs = sized_pairs(run)
    bounded1 = unbiased_vectors(pairs.drop("_dp_size"), run.keys, d0, run.randomness.salt())
    status = screen(run, pairs, weights(bounded1, run.keys, plan1.extra), plan1, plan2, d0)
    first = run.collect(status.where(F.col("_dp_released")))
    bounded2 = biased_vectors(run, pairs.drop("_dp_size"), status, plan2.extra, d0)
    w2 = weights(bounded2, run.keys, plan2.extra)
    second = run.collect(stages.noise_threshold(w2, run.keys, plan2.noise, plan2.scale, plan2.threshold, run.randomness))
    table = pa.concat_tables([first, second.cast(first.schema)])
    return table, [Round.from_plan(0, plan1, first.num_rows), Round.from_plan(1, plan2, second.num_rows)]
