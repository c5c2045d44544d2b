"""Where a release's time goes: wall, CPU (user + system, all threads) and page faults per executed SQL
template and per noise scan, next to the raw-SQL floor of benchmarks/bench_speed.py, on its synthetic
table (DP-SIPS recipe) with BIGINT or VARCHAR keys.

    python benchmarks/profile_stages.py --rows 10000000 --threads 2 --key-type bigint varchar --algos dpsips
    python benchmarks/profile_stages.py --rows 5000000 --algos weighted_gaussian --noise-threads 1 2

A "noise scan" row is the whole noise stage of one round (duckdp/noise_stage.py: the weights query it
streams, Arrow batches, PRF noise, threshold); the template rows are the other queries (stored frames,
key dictionary, output). `--noise-threads` overrides the noise pool size (default: DuckDB's `threads`),
alternating the values release by release. Unseeded releases (the production path), ρ = 0.1, δ = 1e-5,
Δ0 = 100; one warm-up release, then `--repeat` measured ones (means per release; floor and release
medians).
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp import noise_stage  # noqa: E402
from duckdp import run as run_module  # noqa: E402
from duckdp.datasets import create_synthetic  # noqa: E402
from duckdp.stages import duckdb as duckdb_stages  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_speed import DELTA0, FLOOR_SQL, FLOOR_THRESHOLD, KEY_TYPES  # noqa: E402


def sample() -> tuple[float, float, float, int]:
    """(wall, user + system CPU, system CPU, minor page faults) of this process so far."""
    t = os.times()
    return time.perf_counter(), t.user + t.system, t.system, resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def delta(before: tuple, after: tuple) -> list[float]:
    return [b - a for a, b in zip(before, after, strict=True)]


class Stages:
    """Wraps RunContext's query methods and the noise stage to add up `sample()` deltas per label."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])

    def wrap(self, label: Callable[..., str], fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            before = sample()
            try:
                return fn(*args, **kwargs)
            finally:
                row = self.totals[label(*args, **kwargs)]
                for i, d in enumerate(delta(before, sample())):
                    row[i] += d
                row[4] += 1
        return timed

    def install(self) -> None:
        for method in ("execute", "arrow", "fetch"):
            original = getattr(run_module.RunContext, method)
            setattr(run_module.RunContext, method,
                    self.wrap(lambda _self, template, *a, m=method, **k: f"{m} {template}", original))
        run_module.RunContext.scalar = self.wrap(lambda _self, sql: "scalar " + sql.split(" FROM ")[0][:40],
                                                 run_module.RunContext.scalar)
        scan = self.wrap(lambda *a, **k: "noise scan (one round)", noise_stage.scan_noisy)
        noise_stage.scan_noisy = scan
        duckdb_stages.scan_noisy = scan


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads")
    ap.add_argument("--key-type", nargs="+", choices=["bigint", "varchar"], default=["bigint", "varchar"])
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian", "dpsips"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--noise-threads", type=int, nargs="+", default=[None],
                    help="noise pool sizes to alternate (default: DuckDB's threads)")
    args = ap.parse_args(argv)

    stages = Stages()
    stages.install()
    pool_default = run_module.RunContext.threads      # DuckDB's threads, which the noise pool follows

    def set_pool(pool: int | None) -> None:
        """The noise pool's size for the next runs: `pool` threads, or DuckDB's (None)."""
        threads = pool_default if pool is None else property(lambda ctx: pool)
        run_module.RunContext.threads = threads  # type: ignore[method-assign]
    con = duckdb.connect()
    create_synthetic(con, "synth_bigint", args.rows, seed=0)
    con.execute(f"SET threads = {int(args.threads)}")
    print(f"# profile_stages: {args.rows:,} rows, {args.threads} DuckDB threads, {os.cpu_count()} CPUs, "
          f"DuckDB {duckdb.__version__}; load average {os.getloadavg()[0]:.2f} at start")
    for key_type in args.key_type:
        keys, rebuild = KEY_TYPES[key_type]
        con.execute("CREATE OR REPLACE TABLE synth AS " + (rebuild or "SELECT * FROM synth").replace(
            "FROM synth", "FROM synth_bigint"))
        floor_sql = FLOOR_SQL.format(keys=", ".join(keys), delta0=DELTA0)
        floor_params = {"salt": 0x1234_5678_9ABC_DEF0, "threshold": FLOOR_THRESHOLD}
        con.sql(floor_sql, params=floor_params).to_arrow_table()       # warm-up
        for algo in args.algos:
            for pool in args.noise_threads:
                set_pool(pool)
                duckdp.select(con, "synth", algo=algo, rho=0.1, delta=1e-5, max_contributions=DELTA0, item_col="item")
            stages.totals.clear()
            floors: list[list[float]] = []
            runs: dict[int | None, list[list[float]]] = collections.defaultdict(list)
            per_pool: dict[int | None, dict] = {}
            for r in range(args.repeat):
                before = sample()
                con.sql(floor_sql, params=floor_params).to_arrow_table()
                floors.append(delta(before, sample()))
                for pool in args.noise_threads if r % 2 == 0 else args.noise_threads[::-1]:
                    set_pool(pool)
                    stages.totals.clear()
                    before = sample()
                    duckdp.select(con, "synth", algo=algo, rho=0.1, delta=1e-5, max_contributions=DELTA0,
                                  item_col="item")
                    runs[pool].append(delta(before, sample()))
                    for label, row in stages.totals.items():
                        acc = per_pool.setdefault(pool, {}).setdefault(label, [0.0] * 5)
                        for i, v in enumerate(row):
                            acc[i] += v
            set_pool(None)
            fw, fc = (statistics.median(f[i] for f in floors) for i in (0, 1))
            print(f"\n## {key_type} keys, {algo}; load average {os.getloadavg()[0]:.2f} at the end\n")
            print(f"floor: wall {fw:.3f} s, CPU {fc:.3f} s (median of {args.repeat})")
            for pool, rs in runs.items():
                w, c, s, f = (statistics.median(x[i] for x in rs) for i in range(4))
                name = "DuckDB's threads" if pool is None else pool
                print(f"\nnoise pool {name}: wall {w:.3f} s ({w / fw:.2f}× floor), CPU {c:.3f} s "
                      f"({c / fc:.2f}× floor), system {s:.3f} s, {f:,.0f} page faults (medians of {args.repeat})\n")
                print("| stage | calls | wall s | CPU s | system s | page faults |")
                print("|---|---:|---:|---:|---:|---:|")
                for label, (lw, lc, ls, lf, n) in sorted(per_pool[pool].items(), key=lambda kv: -kv[1][0]):
                    k = args.repeat
                    print(f"| {label} | {n / k:g} | {lw / k:.3f} | {lc / k:.3f} | {ls / k:.3f} | {lf / k:,.0f} |")


if __name__ == "__main__":
    main()
