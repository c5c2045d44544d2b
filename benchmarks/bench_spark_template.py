"""Spark: a stage as the old hand-written DataFrame formula vs the DuckDB template run by `spark.sql`.

Issue #19 §3: where Spark can run the same SQL template, prefer it to a second hand-written formula,
and measure the speed either way. `--stage mad`: MAD stages 1–4 (mad_weights.sql) over the same
persisted user vectors (pairs → sized → truncate → mad_vectors on one Spark run); `--stage adaptive`:
adaptive SIPS steps 3–4 (adaptive_sips_vectors.sql + adaptive_sips_weights.sql) over the same
persisted kept pairs, half the keys at level β_min = 0.5 so both branches run; `--stage mad2r`: MAD2R's
round-2 user vectors (mad2r_remaining.sql → truncate → mad2r_vectors.sql + mad2r_biased.sql's water-filling)
over the same stored sized pairs and a fixed synthetic screen (by key hash: 20 % removed, 30 % with a bias
in [0.3, 0.9], the rest β = 1), so most users run the water-filling. Each timing forces the weights
(vectors) to Arrow on the driver. Runs alternate (A B A B …) so drift hits both; reports each variant's
times, the median ratio and the largest |Δw| between the two (after a first call of each on its own engine
from one seed, asserted identical in every other column).

    PYTHONPATH=. nice -n 10 python benchmarks/bench_spark_template.py [--stage mad|adaptive|mad2r] [--data PATH]
        [--repeats N]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from duckdp.mechanisms import get
from duckdp.mechanisms.adaptive_sips import spark as adaptive
from duckdp.mechanisms.base import Params
from duckdp.mechanisms.mad import spark as own
from duckdp.privacy.budget import EpsDelta
from duckdp.rng import Randomness
from duckdp.spark.source import resolve
from duckdp.spark.stages import SparkStages

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "reddit_1pct_unigrams.parquet"


def dataframe_weights(engine: SparkStages, vectors, plan):
    """The hand-written DataFrame formula Spark used before the template (sql/mad_weights.sql's twin)."""
    keys, d, uw = engine.keys, F.col("_dp_d"), F.col("_dp_uw")
    adaptive = d.between(plan.extra.min_degree, plan.extra.max_degree)
    tau = F.lit(plan.extra.tau)
    initial = vectors.where(adaptive).groupBy(*keys).agg(F.sum(uw / F.sqrt(d)).alias("_dp_init"))
    truncated = (initial.where(F.col("_dp_init") > tau)
                 .select(*keys, ((F.col("_dp_init") - tau) / F.col("_dp_init")).alias("_dp_ratio")))
    excess = (vectors.where(adaptive).join(truncated, keys).groupBy("_dp_user")
              .agg(F.sum(F.col("_dp_ratio") * uw / F.sqrt(d)).alias("_dp_e")))
    rerouted = F.when(adaptive, F.lit(plan.extra.reroute) * F.coalesce(F.col("_dp_e"), F.lit(0.0)) * uw
                      + (1 - 1 / F.sqrt(d)) * uw).otherwise(uw)
    return (vectors.join(excess, "_dp_user", "left").groupBy(*keys)
            .agg((F.least(F.coalesce(F.sum(F.when(adaptive, uw / F.sqrt(d))), F.lit(0.0)), tau)
                  + F.sum(rerouted)).alias("_dp_w")))


def dataframe_adaptive(engine: SparkStages, kept, cap: float):
    """The hand-written DataFrame formula Spark used before for adaptive SIPS steps 3–4."""
    lvl, d = F.col("_dp_level"), F.col("_dp_d")
    stats = kept.groupBy("_dp_user").agg(
        F.sum(lvl * lvl).alias("_dp_ss"), F.count(F.when(lvl >= 1.0, 1)).alias("_dp_nhi"),
        F.coalesce(F.sum(F.when(lvl < 1.0, lvl * lvl)), F.lit(0.0)).alias("_dp_sslo"))
    capped = F.lit(cap) / F.sqrt(d)
    scaled = kept.join(stats, "_dp_user").withColumn("_dp_hi", F.least(1.0 / F.sqrt(F.col("_dp_ss")), capped))
    low = F.least(lvl * F.sqrt(F.greatest(1.0 - F.col("_dp_nhi") * F.col("_dp_hi") * F.col("_dp_hi"), F.lit(0.0))
                               / F.col("_dp_sslo")), capped)
    vectors = scaled.select("_dp_user", *engine.keys,
                            F.when(lvl >= 1.0, F.col("_dp_hi")).otherwise(low).alias("_dp_x"))
    return vectors.groupBy(*engine.keys).agg(F.sum("_dp_x").alias("_dp_w"))


def dataframe_mad2r(engine: SparkStages, pairs, status, max_contributions: int, beta_min: float, beta_max: float):
    """The hand-written DataFrame formula Spark used before for MAD2R's round-2 vectors (stored, as the stage)."""
    from pyspark.sql import Window

    keys = engine.keys
    b = F.greatest(F.least(F.coalesce(F.col("_dp_beta"), F.lit(1.0)), F.lit(1.0)), F.lit(beta_min))
    user = Window.partitionBy("_dp_user")
    remaining = (pairs.drop("_dp_size").join(status, keys, "left")
                 .where(F.col("_dp_round2").isNull() | F.col("_dp_round2"))
                 .select("_dp_user", *keys, b.alias("_dp_b")))
    kept = engine.truncate(engine.sized(remaining), max_contributions)      # the flag reads the kept pairs (§4)
    kept = (kept.withColumn("_dp_biased", F.max((F.col("_dp_b") < 1).cast("int")).over(user) == 1)
            .withColumn("_dp_v", F.col("_dp_b") / F.sqrt(F.col("_dp_d"))))
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
    room = 1 - (F.col("_dp_r") - 1) * cap * cap
    lam = F.when(room > 0, F.sqrt(room / F.col("_dp_tail")))
    valid = (lam * v <= cap * (1 + 1e-9)) & (prev.isNull() | (lam * prev >= cap * (1 - 1e-9)))
    solved = ordered.withColumn("_dp_lambda", F.min(F.when(valid, lam)).over(user))
    biased = solved.select(*out, F.coalesce(F.least(F.col("_dp_lambda") * v, cap),
                                            1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw"), "_dp_biased")
    return engine.store(plain.unionByName(biased))


def screen(engine: SparkStages, pairs):
    """A fixed MAD2R screen by key hash h = xxhash64(keys) mod 10: 0–1 removed (1: released), 2–4 biased
    β = 0.3 + (h' mod 7)/10, the rest without a row (β = 1)."""
    h = F.pmod(F.xxhash64(*[F.col(k) for k in engine.keys]), F.lit(10))
    beta = 0.3 + F.pmod(F.xxhash64(F.lit(7), *[F.col(k) for k in engine.keys]), F.lit(7)) / 10.0
    return engine.store(pairs.select(*engine.keys).distinct().where(h < 5).select(
        *engine.keys, (h == 1).alias("_dp_released"), (h >= 2).alias("_dp_round2"),
        F.when(h >= 2, beta).otherwise(1.0).alias("_dp_beta")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-contributions", type=int, default=100)
    ap.add_argument("--stage", choices=["mad", "adaptive", "mad2r"], default="mad")
    args = ap.parse_args()
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    mech = get("mad")
    (plan,) = mech.plan(EpsDelta(1.0, 1e-5), Params(args.max_contributions, mech.check_params({})))
    d0 = args.max_contributions
    engine = SparkStages(spark, resolve(spark, spark.createDataFrame(pq.read_table(args.data)), "user_id", "item"),
                         Randomness(1))
    order, value = engine.keys, "_dp_w"
    try:
        if args.stage == "mad":
            pairs = engine.store(engine.sized(engine.pairs()))
            vectors = own.mad_vectors(engine, engine.truncate(pairs, d0))
            variants = {"dataframe": lambda e: dataframe_weights(e, vectors, plan),
                        "template": lambda e: own.mad_weights(e, vectors, plan)}
        elif args.stage == "adaptive":
            level = F.when(F.xxhash64(*[F.col(k) for k in engine.keys]) % 2 == 0, 1.0).otherwise(0.5)
            vectors = engine.store(engine.truncate(engine.sized(engine.pairs().withColumn("_dp_level", level)), d0))
            variants = {"dataframe": lambda e: dataframe_adaptive(e, vectors, 2.0),
                        "template": lambda e: adaptive.weights(e, adaptive.vectors(e, vectors, 2.0))}
        else:       # the stage truncates: each variant's first call runs on its own engine from one seed
            vectors = engine.store(engine.sized(engine.pairs()))
            status = screen(engine, vectors)
            variants = {"dataframe": lambda e: dataframe_mad2r(e, vectors, status, d0, 0.5, 1.2),
                        "template": lambda e: own.mad2r_vectors(e, vectors, status, d0, 0.5, 1.2,
                                                                       e.randomness.salt())}
            order, value = ["_dp_user", *engine.keys], "_dp_uw"
        what = "pairs" if args.stage == "mad2r" else "kept pairs"
        print(f"{args.data.name} [{args.stage}]: {vectors.count():,} {what}, Δ0 = {d0}")
        results = {}                                                                              # warm-up
        for name, f in variants.items():
            fresh = SparkStages(spark, engine.source, Randomness(2))
            results[name] = f(fresh).orderBy(*order).toArrow()
            fresh.close()
        a, b = (r.column(value).to_numpy() for r in results.values())
        rest = [c for c in results["template"].column_names if c != value]
        assert results["dataframe"].select(rest).equals(results["template"].select(rest))
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, f in variants.items():
                start = time.perf_counter()
                out = f(engine)
                out.toArrow()
                times[name].append(time.perf_counter() - start)
                engine.drop(out)                                    # mad2r's stage stores its vectors
        for name, t in times.items():
            print(f"  {name:9}: median {statistics.median(t):.3f} s  ({', '.join(f'{x:.3f}' for x in t)})")
        ratios = [t / d for t, d in zip(times["template"], times["dataframe"], strict=True)]
        print(f"  template/dataframe: median ratio {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}–{max(ratios):.3f}); {len(a):,} rows, max |Δ{value}| = "
              f"{float(np.max(np.abs(a - b))):.3g} (relative {float(np.max(np.abs(a - b) / np.abs(b))):.3g})")
    finally:
        engine.close()
        spark.stop()


if __name__ == "__main__":
    main()
