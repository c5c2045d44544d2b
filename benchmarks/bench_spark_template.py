"""Spark: a stage as the old hand-written DataFrame formula vs the DuckDB template run by `spark.sql`.

Issue #19 §3: where Spark can run the same SQL template, prefer it to a second hand-written formula,
and measure the speed either way. `--stage mad`: MAD stages 1–4 (mad_weights.sql) over the same
persisted user vectors (pairs → sized → truncate → mad_vectors on one Spark run); `--stage adaptive`:
adaptive SIPS steps 3–4 (adaptive_sips_vectors.sql + adaptive_sips_weights.sql) over the same
persisted kept pairs, half the keys at level β_min = 0.5 so both branches run. Each timing forces the
weights to Arrow on the driver. Runs alternate (A B A B …) so drift hits both; reports each variant's times, the median
ratio and the largest |Δw| between the two.

    PYTHONPATH=. nice -n 10 python benchmarks/bench_spark_template.py [--data PATH] [--repeats N]
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-contributions", type=int, default=100)
    ap.add_argument("--stage", choices=["mad", "adaptive"], default="mad")
    args = ap.parse_args()
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    mech = get("mad")
    (plan,) = mech.plan(EpsDelta(1.0, 1e-5), Params(args.max_contributions, mech.check_params({})))
    engine = SparkStages(spark, resolve(spark, spark.createDataFrame(pq.read_table(args.data)), "user_id", "item"),
                         Randomness(1))
    try:
        if args.stage == "mad":
            pairs = engine.store(engine.sized(engine.pairs()))
            vectors = own.mad_vectors(engine, engine.truncate(pairs, args.max_contributions))
            variants = {"dataframe": lambda: dataframe_weights(engine, vectors, plan),
                        "template": lambda: own.mad_weights(engine, vectors, plan)}
        else:
            level = F.when(F.xxhash64(*[F.col(k) for k in engine.keys]) % 2 == 0, 1.0).otherwise(0.5)
            vectors = engine.store(engine.truncate(engine.sized(engine.pairs().withColumn("_dp_level", level)),
                                                   args.max_contributions))
            variants = {"dataframe": lambda: dataframe_adaptive(engine, vectors, 2.0),
                        "template": lambda: adaptive.weights(engine, adaptive.vectors(engine, vectors, 2.0))}
        print(f"{args.data.name} [{args.stage}]: {vectors.count():,} kept pairs, Δ0 = {args.max_contributions}")
        results = {name: f().orderBy(*engine.keys).toArrow() for name, f in variants.items()}   # warm-up
        a, b = (r.column("_dp_w").to_numpy() for r in results.values())
        assert results["dataframe"].select(engine.keys).equals(results["template"].select(engine.keys))
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, f in variants.items():
                start = time.perf_counter()
                f().toArrow()
                times[name].append(time.perf_counter() - start)
        for name, t in times.items():
            print(f"  {name:9}: median {statistics.median(t):.3f} s  ({', '.join(f'{x:.3f}' for x in t)})")
        ratios = [t / d for t, d in zip(times["template"], times["dataframe"], strict=True)]
        print(f"  template/dataframe: median ratio {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}–{max(ratios):.3f}); max |Δw| = {float(np.max(np.abs(a - b))):.3g}")
    finally:
        engine.close()
        spark.stop()


if __name__ == "__main__":
    main()
