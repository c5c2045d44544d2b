"""A 100M-row release inside DuckDB's memory limit, spilling to disk, with no input rows in Python.

Builds a synthetic table (DP-SIPS recipe, duckdp.datasets.synthetic_arrow) in a file-backed
temporary database, one chunk at a time (user ids offset per chunk, so users stay distinct and
Python never holds more than one chunk), then runs each mechanism through `duckdp.select` with
`SET memory_limit` and a `temp_directory` for spilling. Python only ever sees the released keys.
Reported per mechanism: wall time, keys released (or DuckDB's out-of-memory error), peak RSS of the
process during the run (sampled from /proc), the most memory DuckDB's buffer manager held
(duckdb_memory(): the rest of the RSS is Python's and the allocator's) and the largest spill seen in
duckdb_temporary_files().

    python benchmarks/bench_large.py                          # 100M rows, 2GB limit
    python benchmarks/bench_large.py --rows 5000000           # smoke run
    python benchmarks/bench_large.py --rows 1000000000 --memory-limit 16GB --dir /big/disk   # 1B rows
    python benchmarks/bench_large.py --aggregate --algos adaptive_sips --threads 16   # issue #20: GROUP BY
    python benchmarks/bench_large.py --aggregate --rows 10000000 --memory-limit 300MB --threads 2 \
        --key-type VARCHAR --db /tmp/big10m_varchar.duckdb    # build once, reuse in later runs

--aggregate adds a value column (a skewed amount in [0, 500): 500·u⁴ of a per-row hash u, one-cent grid)
and times, after each mechanism's `select`, `duckdp.aggregate` with the same mechanism as its key
selection and four metrics (users, count, sum and mean of the value clipped to [0, 500], Δ0 = the same,
one row per user and key) at the same budget, then prints the aggregate/select ratio (issue #20: ≤ 1.5 at
16 threads on a 16-core machine, 100M rows, 2 GB). `--algos threshold` (with --aggregate) times
aggregate(keys="threshold") after select(algo="count_gaussian"), the same one Gaussian round on user counts.

The noise stage streams the weights to Python in Arrow batches (duckdp/noise_stage.py), so Python
holds one batch per thread plus the released keys (for MAD2R, the keys its screen stores), never
all keys' arrays.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

import duckdb
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.datasets import synthetic_arrow  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_timing import cpu_seconds  # noqa: E402

PAGE = 4096


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Sampler:
    """Peak RSS of this process and peak DuckDB spill size while the block runs (every 20 ms)."""

    def __init__(self, con):
        self.con, self.peak, self.spill, self.duckdb = con.cursor(), 0, 0, 0

    def _loop(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss())
            try:
                size = self.con.sql("SELECT coalesce(sum(size), 0) FROM duckdb_temporary_files()").fetchall()[0][0]
                self.spill = max(self.spill, int(size))
                (used,), = self.con.sql("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()").fetchall()
                self.duckdb = max(self.duckdb, int(used))
            except duckdb.Error:
                pass

    def __enter__(self):
        self.peak, self._stop = rss(), threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())
        self.con.close()


def build(con, rows: int, chunk: int, seed: int, values: bool = False, key_type: str = "BIGINT") -> float:
    """Fill table `big` chunk by chunk (with a `value` column when asked, keys as `key_type`); return seconds."""
    start, offset = time.perf_counter(), 0
    con.execute("CREATE TABLE big (user_id BIGINT, item BIGINT)")
    for i, first in enumerate(range(0, rows, chunk)):
        part = synthetic_arrow(min(chunk, rows - first), seed + i)
        part = part.set_column(0, "user_id", pc.add(part.column("user_id"), offset))
        offset = pc.max(part.column("user_id")).as_py() + 1
        con.register("_bench_chunk", part)
        con.execute("INSERT INTO big SELECT * FROM _bench_chunk")
        con.unregister("_bench_chunk")
        del part
    if values:
        con.execute("ALTER TABLE big ADD COLUMN value DOUBLE")
        con.execute("UPDATE big SET value = round(500 * pow(hash(user_id, item, 7) / 18446744073709551616.0, 4), 2)")
    if key_type != "BIGINT":           # the same keys as text (digest counters, string hashing)
        con.execute(f"ALTER TABLE big ALTER COLUMN item SET DATA TYPE {key_type}")
    return time.perf_counter() - start


METRICS = {"users": "users", "rows": "count", "amount": ("sum", "value", 0, 500),
           "avg_amount": ("mean", "value", 0, 500)}


def timed(con, release) -> tuple[float, float, str, Sampler]:
    """Wall seconds, CPU seconds, keys released (or DuckDB's out-of-memory error) and the memory sampler of
    `release()`. CPU time is the steadier measure on a shared machine, where wall time depends on the load."""
    with Sampler(con) as s:
        start, cpu = time.perf_counter(), cpu_seconds()
        try:
            released = f"{len(release()):,}"
        except duckdb.OutOfMemoryException as exc:
            released = "OUT OF MEMORY: " + str(exc).splitlines()[0]
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    return seconds, cpu, released, s


def row(query: str, label: str, seconds: str, cpu: str, released: str, s: Sampler) -> None:
    print(f"| {query} | {label} | {seconds} | {cpu} | {released} | {s.peak / 2**20:,.0f} | {s.duckdb / 2**20:,.0f} | "
          f"{s.spill / 2**20:,.0f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--chunk", type=int, default=5_000_000)
    ap.add_argument("--memory-limit", default="2GB")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian", "dpsips", "mad2r"])
    ap.add_argument("--max-contributions", type=int, default=100)
    ap.add_argument("--aggregate", action="store_true",
                    help="also time duckdp.aggregate with each mechanism as its key selection (issue #20)")
    ap.add_argument("--key-type", choices=["BIGINT", "VARCHAR"], default="BIGINT",
                    help="type of the key column `item` (VARCHAR: the same ids as text)")
    ap.add_argument("--dir", default=None, help="where to put the database and spill files (default: a temp dir)")
    ap.add_argument("--db", default=None,
                    help="a database file to keep: built on the first run, its table reused by later ones (so runs "
                         "of two checkouts can interleave on one table; --rows, --key-type, --aggregate then apply "
                         "only to the build)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="duckdp_large_", dir=args.dir))
    try:
        reuse = args.db is not None and Path(args.db).exists()
        con = duckdb.connect(args.db or str(work / "large.duckdb"))
        con.execute("SET memory_limit = $m", {"m": args.memory_limit})
        con.execute("SET temp_directory = $d", {"d": str(work / "spill")})
        con.execute("SET preserve_insertion_order = false")
        if args.threads:
            con.execute("SET threads = $t", {"t": args.threads})
        with Sampler(con) as s:
            seconds = 0.0 if reuse else build(con, args.rows, args.chunk, seed=2024, values=args.aggregate,
                                              key_type=args.key_type)
        users = con.sql("SELECT count(DISTINCT user_id), count(DISTINCT item) FROM big").fetchall()[0]
        threads = con.sql("SELECT current_setting('threads')").fetchall()[0][0]
        (rows, key_type), = con.sql("SELECT count(*), typeof(any_value(item)) FROM big").fetchall()
        print(f"table: {rows:,} rows, {users[0]:,} users, {users[1]:,} items; "
              f"{'reused from ' + args.db if reuse else f'built in {seconds:.1f} s'} "
              f"(peak RSS {s.peak / 2**20:,.0f} MB); memory_limit={args.memory_limit}, "
              f"threads={threads}, keys {key_type}")
        print("| algo | budget | seconds | CPU s | released | peak RSS MB | peak DuckDB buffers MB | peak spill MB |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for algo in args.algos:
            chosen = "count_gaussian" if algo == "threshold" else algo      # keys="threshold": one Gaussian round
            mech = duckdp.mechanisms.get(chosen)
            budget = dict(rho=0.1, delta=1e-5) if duckdp.ZCDP in mech.budgets else dict(epsilon=1.0, delta=1e-5)
            label = ", ".join(f"{k}={v:g}" for k, v in budget.items())
            seconds, cpu, released, s = timed(con, partial(duckdp.select, con, "big", algo=chosen,
                                                           max_contributions=args.max_contributions, seed=1,
                                                           **budget))
            row(chosen, label, f"{seconds:.1f}", f"{cpu:.1f}", released, s)
            if args.aggregate:             # the same mechanism as the key selection of a 4-metric GROUP BY
                agg_seconds, agg_cpu, released, s = timed(con, partial(
                    duckdp.aggregate, con, "big", by="item", metrics=METRICS, keys=algo,
                    max_contributions=args.max_contributions, max_rows_per_key=1, seed=1, **budget))
                row(f"aggregate({algo}), 4 metrics", label, f"{agg_seconds:.1f} ({agg_seconds / seconds:.2f}× select)",
                    f"{agg_cpu:.1f} ({agg_cpu / cpu:.2f}×)", released, s)
        con.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
