"""Spark driver heap left behind by duckdp releases: one release per mechanism on one local[2] session, then
System.gc(), heap used and the top of `jcmd <pid> GC.class_histogram` (needs a JDK's jcmd on PATH).

Why: the test suite runs ~180 Spark releases in one process; this shows what each leaves for the ContextCleaner
(RESULTS.md "Spark driver heap across releases (stop 31)").

    python benchmarks/spark_driver_heap.py mad2r adaptive_sips [--rows 20000] [--driver-memory 1g]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

import duckdp
from duckdp.spark import use_driver_python


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("algos", nargs="*", default=["weighted_gaussian", "dpsips", "mad2r", "adaptive_sips"])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--top", type=int, default=8, help="histogram rows to print")
    args = ap.parse_args()
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", args.driver_memory)
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    use_driver_python(spark)
    jvm = spark._jvm
    runtime, pid = jvm.java.lang.Runtime.getRuntime(), jvm.java.lang.ProcessHandle.current().pid()

    def report(tag: str) -> None:
        jvm.java.lang.System.gc()
        time.sleep(0.3)
        used = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
        print(f"{tag}: driver heap used after GC {used:.0f} MB", flush=True)
        if shutil.which("jcmd"):
            lines = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True).stdout
            print(*lines.splitlines()[3:3 + args.top], sep="\n", flush=True)

    rng = np.random.default_rng(1)
    table = pa.table({"user_id": rng.integers(0, args.rows // 10, args.rows),
                      "item": [f"k{i}" for i in rng.zipf(1.3, args.rows) % 5000]})
    report("session start")
    for algo in args.algos:
        duckdp.select(spark, spark.createDataFrame(table), algo=algo, epsilon=1, delta=1e-5, max_contributions=5,
                      seed=1).to_arrow()
        report(algo)
    time.sleep(5)
    report("5 s later")
    spark.stop()


if __name__ == "__main__":
    main()
