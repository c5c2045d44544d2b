"""Spark driver heap left behind by duckdp releases: `--repeat` releases per mechanism on one local[2] session,
after each System.gc() (unless --no-gc), heap used and the top of `jcmd <pid> GC.class_histogram` (needs a JDK's
jcmd on PATH), with each release's wall and CPU seconds (the JVM's process tree: driver, executors, Python workers;
plus this Python driver).

Why: the test suite runs ~180 Spark releases in one process; this shows what each leaves for the ContextCleaner
(RESULTS.md "Spark driver heap across releases (stop 31)" and "Spark driver memory across releases (stop 32)").
`--auto-broadcast` keeps Spark's automatic broadcast joins during releases (duckdp before stop 32), for A/B runs.

    python benchmarks/spark_driver_heap.py mad2r adaptive_sips [--rows 20000] [--driver-memory 1g] [--repeat 5]
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import time

import numpy as np
import pyarrow as pa
from bench_spark_threshold import _tree_cpu  # benchmarks/ is on the path when run as a script
from pyspark.sql import SparkSession

import duckdp
import duckdp.spark.lifecycle
from duckdp.spark import use_driver_python


def _cpu() -> float:
    """CPU seconds of this process and its children, recursively (the JVM and its Python workers)."""
    import psutil  # the `bench` extra; imported here so `--help` runs without it (the slow suite checks that)

    return sum(psutil.Process().cpu_times()[:2]) + _tree_cpu()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("algos", nargs="*", default=["weighted_gaussian", "dpsips", "mad2r", "adaptive_sips"])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--top", type=int, default=8, help="histogram rows to print")
    ap.add_argument("--repeat", type=int, default=1, help="releases of each mechanism, one after the other")
    ap.add_argument("--no-gc", action="store_true",
                    help="no System.gc() between releases (a user's program): print the heap used as it is")
    ap.add_argument("--auto-broadcast", action="store_true",
                    help="keep Spark's automatic broadcast joins during releases (duckdp before stop 32)")
    args = ap.parse_args()
    if args.auto_broadcast:     # the session's thresholds left alone: runs plan as before stop 32
        duckdp.spark.lifecycle.no_auto_broadcast = lambda spark: contextlib.nullcontext()
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", args.driver_memory)
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    use_driver_python(spark)
    jvm = spark._jvm
    runtime, pid = jvm.java.lang.Runtime.getRuntime(), jvm.java.lang.ProcessHandle.current().pid()

    def report(tag: str) -> None:
        if not args.no_gc:
            jvm.java.lang.System.gc()
            time.sleep(0.3)
        used = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
        print(f"{tag}: driver heap used{'' if args.no_gc else ' after GC'} {used:.0f} MB", flush=True)
        if shutil.which("jcmd") and args.top:
            lines = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True).stdout
            print(*lines.splitlines()[3:3 + args.top], sep="\n", flush=True)

    rng = np.random.default_rng(1)
    table = pa.table({"user_id": rng.integers(0, args.rows // 10, args.rows),
                      "item": [f"k{i}" for i in rng.zipf(1.3, args.rows) % 5000]})
    report("session start")
    for algo in args.algos:
        for i in range(args.repeat):
            t0, c0 = time.perf_counter(), _cpu()
            out = duckdp.select(spark, spark.createDataFrame(table), algo=algo, epsilon=1, delta=1e-5,
                                max_contributions=5, seed=1).to_arrow()
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            digest = hashlib.sha256(repr(out.to_pylist()).encode()).hexdigest()[:12]      # same seed: same keys
            report(f"{algo}{'' if args.repeat == 1 else f' #{i + 1}'} ({out.num_rows} keys {digest}, "
                   f"wall {wall:.1f} s, CPU {cpu:.1f} s, load {os.getloadavg()[0]:.1f})")
    time.sleep(5)
    report("5 s later")
    spark.stop()


if __name__ == "__main__":
    main()
