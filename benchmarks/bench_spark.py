"""DuckDB vs Spark for the same mechanisms on the same synthetic data: wall time and keys released.

The data is the DP-SIPS recipe (duckdp.datasets), written once per size as Parquet; DuckDB reads it
into a table, Spark reads the Parquet files. Both run `duckdp.select` with the same plan (zCDP
ρ = 0.1, δ = 1e-5, Δ0 = 100; seeded). Spark's fixed start-up (JVM, session, a first trivial job) is
timed separately and not included in the per-release times; each release's time includes reading
the input and collecting the released keys to the driver.

    python benchmarks/bench_spark.py                                    # local[2], 1M and 10M rows
    python benchmarks/bench_spark.py --master local[16] --rows 100000000 --algos weighted_gaussian dpsips
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.datasets import synthetic_arrow  # noqa: E402

BUDGET = {"rho": 0.1, "delta": 1e-5}


def start_spark(master: str, partitions: int):
    """A SparkSession and the seconds its start-up and first job took."""
    t = time.perf_counter()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("duckdp-bench")
             .config("spark.sql.shuffle.partitions", str(partitions)).config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", os.environ.get("DUCKDP_SPARK_DRIVER_MEMORY", "4g")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(1).count()
    return spark, time.perf_counter() - t


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian", "dpsips", "mad"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--shuffle-partitions", type=int, default=None,
                    help="spark.sql.shuffle.partitions (default: 4 × the local[N] cores)")
    ap.add_argument("--duckdb-threads", type=int, default=None, help="DuckDB threads (default: as Spark's cores)")
    ap.add_argument("--no-duckdb", action="store_true", help="Spark only (e.g. 100M rows on a big device)")
    args = ap.parse_args(argv)
    cores = int(args.master[len("local["):-1]) if args.master.startswith("local[") and args.master[-2].isdigit() else 2
    spark, startup = start_spark(args.master, args.shuffle_partitions or 4 * cores)
    print(f"Spark {spark.version} {args.master}: start-up + first job {startup:.1f} s (not in the times below)")
    con = duckdb.connect()
    con.execute(f"SET threads = {args.duckdb_threads or cores}")
    print(f"DuckDB {duckdb.__version__}, threads={args.duckdb_threads or cores}; ρ={BUDGET['rho']}, "
          f"δ={BUDGET['delta']}, Δ0=100, median of {args.repeat}\n")
    print(f"{'rows':>12} {'algo':<19} {'DuckDB s':>9} {'released':>9} {'Spark s':>9} {'released':>9} "
          f"{'Spark/DuckDB':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            path = str(Path(tmp) / f"synth_{rows}.parquet")
            table = synthetic_arrow(rows, seed=0)
            pq.write_table(table, path, row_group_size=1 << 20)
            del table
            df = spark.read.parquet(path)
            if not args.no_duckdb:
                con.execute(f"CREATE OR REPLACE TABLE synth AS SELECT * FROM read_parquet('{path}')")
            for algo in args.algos:
                d_time, d_n = (None, None)
                if not args.no_duckdb:
                    d_time, rel = timed(lambda algo=algo: duckdp.select(con, "synth", algo=algo, max_contributions=100,
                                                              seed=1, **BUDGET), args.repeat)
                    d_n = len(rel)
                s_time, rel = timed(lambda df=df, algo=algo: duckdp.select(spark, df, algo=algo, max_contributions=100,
                                                                           seed=1, **BUDGET), args.repeat)
                ratio = f"{s_time / d_time:.2f}" if d_time else "–"
                print(f"{rows:>12,} {algo:<19} {d_time or float('nan'):>9.2f} {d_n or 0:>9,} {s_time:>9.2f} "
                      f"{len(rel):>9,} {ratio:>12}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
