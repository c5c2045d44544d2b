"""Spark `aggregate(keys="threshold")` on many candidate keys: driver memory, rows collected, time (stop 29).

One seeded call per checkout, each in a fresh process (its own JVM), on a synthetic table written once as
Parquet: `--rows` rows of users with 10 rows each, keys 'k<j>' with j = ⌊U³ · `--keys`⌋ (a long tail of keys
held by one or two users: most keys are threshold candidates that are not released). Reported per checkout:
the Python driver's peak RSS (`ru_maxrss`), the JVM's peak RSS sampled every 0.2 s (driver and executors in one
process on a local master), the largest table collected to the Python driver (`toArrow` rows), the keys
released, wall seconds, the CPU seconds of the JVM's process tree (executors and Python workers) and of the Python
driver during the call, the load, and a digest of the released table (equal digests: the same release under the seed).

    python benchmarks/bench_spark_threshold.py --checkouts /path/to/old /path/to/new   # A/B, 10M rows
    python benchmarks/bench_spark_threshold.py --rows 1000000 --keys 500000 --repeat 2 --event-log /tmp/ev \
        --checkouts /path/to/old /path/to/new                                            # paired, stage timings
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
METRICS = {"raters": "users", "ratings": "count", "avg": ("mean", "rating", 1, 5)}


def write_data(path: Path, rows: int, keys: int) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute("SELECT setseed(0.29)")
    con.execute(f"""COPY (SELECT i // 10 AS user_id, 'k' || CAST(floor(pow(random(), 3) * {int(keys)}) AS BIGINT)
                          AS item, 1 + i % 5 AS rating FROM range({int(rows)}) t(i)) TO '{path}' (FORMAT parquet)""")


def _tree_cpu() -> float:
    """CPU seconds of this process's children, recursively: the JVM (driver and executors on a local master) and
    its Python workers."""
    import psutil

    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def one_run(data: str, partitions: int, event_log: str = "") -> dict:
    """The measured call, in this process (its checkout first on sys.path, set by the parent); `event_log`: a
    folder for Spark's event log (per-stage timings), none if empty."""
    import psutil
    from pyspark.sql import SparkSession

    import duckdp

    builder = SparkSession.builder
    if event_log:
        os.makedirs(event_log, exist_ok=True)
        builder = (builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.compress", "false")
                   .config("spark.eventLog.dir", "file://" + os.path.abspath(event_log)))
    spark = (builder.master("local[2]").appName("duckdp-threshold")
             .config("spark.sql.shuffle.partitions", str(partitions)).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", os.environ.get("DUCKDP_SPARK_DRIVER_MEMORY", "4g")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(data)
    df.count()
    jvm_peak = [0]
    done = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not done.wait(0.2):
            for p in me.children(recursive=True):
                try:
                    if "java" in p.name():
                        jvm_peak[0] = max(jvm_peak[0], p.memory_info().rss)
                except psutil.Error:
                    pass

    collected: list[int] = []
    cls = type(df)
    to_arrow = cls.toArrow

    def spy(self: Any) -> Any:
        out = to_arrow(self)
        collected.append(out.num_rows)
        return out

    setattr(cls, "toArrow", spy)      # noqa: B010 (a spy on the session's DataFrame class)
    threading.Thread(target=sample, daemon=True).start()
    aggregate = duckdp.aggregate   # loaded before the clocks start (duckdp loads its public names on first use)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tree0, driver0 = _tree_cpu(), time.process_time()
    t = time.perf_counter()
    agg = aggregate(spark, df, by="item", user_col="user_id", metrics=METRICS, keys="threshold", rho=0.5,
                    delta=1e-6, max_contributions=10, seed=29)
    wall = time.perf_counter() - t
    cpu_jvm, cpu_driver = _tree_cpu() - tree0, time.process_time() - driver0
    done.set()
    out = agg.to_arrow()
    digest = hashlib.sha256(b"".join(str(c.to_pylist()).encode() for c in out.columns)).hexdigest()[:16]
    spark.stop()
    return {"wall_s": round(wall, 1), "cpu_jvm_workers_s": round(cpu_jvm, 1), "cpu_driver_s": round(cpu_driver, 1),
            "load": os.getloadavg()[0], "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                                                 / 1024),
            "driver_rss_before_mb": round(rss0 / 1024), "jvm_peak_rss_mb": round(jvm_peak[0] / 2**20),
            "max_rows_collected": max(collected, default=0), "released": len(out), "digest": digest}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=5_000_000, help="key range of the long tail")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--checkouts", nargs="+", default=[str(HERE)], help="duckdp checkouts to run, one process each")
    ap.add_argument("--event-log", default="", help="folder for Spark's event logs (per-stage timings)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds over the checkouts, alternating (paired)")
    ap.add_argument("--child", nargs=3, metavar=("DATA", "PARTITIONS", "EVENT_LOG"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(one_run(args.child[0], int(args.child[1]), args.child[2])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "threshold.parquet"
        write_data(data, args.rows, args.keys)
        import duckdb

        n_keys = duckdb.connect().execute(f"SELECT count(DISTINCT item) FROM '{data}'").fetchone()
        print(f"{args.rows:,} rows, {n_keys[0] if n_keys else 0:,} distinct keys", flush=True)
        event_log = os.path.abspath(args.event_log) if args.event_log else ""
        for _ in range(args.repeat):
            for checkout in args.checkouts:
                env = os.environ | {"PYTHONPATH": checkout}
                # cwd: a folder with no duckdp in it. Spark starts its Python workers with `python -m`, which puts
                # the cwd first on sys.path: run from a checkout, every checkout's workers would import that one
                res = subprocess.run([sys.executable, __file__, "--child", str(data), str(args.partitions),
                                      event_log], env=env, capture_output=True, text=True, check=False, cwd=tmp)
                lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
                print(checkout, lines[-1] if lines else f"failed: {res.stderr[-2000:]}", flush=True)


if __name__ == "__main__":
    main()
