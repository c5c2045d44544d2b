"""Where aggregate(keys=<algo>)'s time over select(<algo>) goes (issue #20 "Engines and scale"): CPU seconds (user +
system, all threads) and wall seconds (their ratio: the threads a call kept busy; a serial step shows ≈ 1 on a
many-core machine) of each statement of a seeded select and of a seeded 4-metric aggregate with the same mechanism
as its key selection, in call order, alternated call by call in one process on bench_large.py's table `big`.
A "noise" row is one round's noise stage (its weights query, Arrow batches, PRF noise, threshold), "exact noise"
the discrete Gaussian draws (aggregate_noise.noise: the metrics', drawn in a thread while the engine sums — its
CPU is that thread's, its rows land among the sums' — and keys="threshold"'s); the others are RunContext
calls by template. ρ = 0.1,
δ = 1e-5, Δ0 = 100, one row per user and key, seed 1 (bench_large.py's settings). `--algos threshold` times
aggregate(keys="threshold") against select(algo="count_gaussian"), the same one Gaussian round on user counts.
CPU seconds include ended child processes (aggregate's draw workers, duckdp/draw_pool.py): they show in the
totals, not in the "exact noise" rows (that thread's own CPU).

    python benchmarks/bench_large.py --aggregate --rows 10000000 --threads 2 --memory-limit 2GB \\
        --algos weighted_gaussian --db /tmp/big10m.duckdb                       # build the table once
    nice -n 10 python benchmarks/profile_aggregate.py /tmp/big10m.duckdb --repeat 3 --algos weighted_gaussian

Run it from another checkout's root with PYTHONPATH at that checkout to profile that code.
"""
from __future__ import annotations

import collections
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path.cwd()))                          # the checkout to profile (PYTHONPATH too)
import duckdp  # noqa: E402
from duckdp import aggregate_noise, noise_stage  # noqa: E402
from duckdp import run as run_module  # noqa: E402
from duckdp.stages import duckdb as duckdb_stages  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_timing import alternating, big_table_parser, connect_big, cpu_seconds  # noqa: E402
from bench_large import METRICS  # noqa: E402

log: list[tuple[str, float, float]] = []


def wrap(name: str, fn: Callable) -> Callable:
    """`fn` logging its CPU and wall seconds under `name` (RunContext methods: with the template's name)."""
    clock = time.thread_time if name == "exact noise" else cpu_seconds     # drawn in a thread beside the sums

    def timed(*args: Any, **kwargs: Any) -> Any:
        before, wall = clock(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            label = f"{name} {args[1]}" if name in ("execute", "arrow", "fetch", "reader") else name
            log.append((label if name != "scalar" else f"scalar {str(args[1])[:24]}", clock() - before,
                        time.perf_counter() - wall))
    return timed


def main() -> None:
    ap = big_table_parser(__doc__)
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian"])
    args = ap.parse_args()
    for method in ("execute", "arrow", "fetch", "scalar"):
        setattr(run_module.RunContext, method, wrap(method, getattr(run_module.RunContext, method)))
    noise_stage.scan_noisy = duckdb_stages.scan_noisy = wrap("noise", noise_stage.scan_noisy)
    aggregate_noise.noise = wrap("exact noise", aggregate_noise.noise)
    con = connect_big(args)
    (key_type,), = con.sql("SELECT typeof(any_value(item)) FROM big").fetchall()
    budget = {"rho": 0.1, "delta": 1e-5}

    def call(kind: str, algo: str) -> Any:
        if kind == "select":          # keys="threshold" against select's one Gaussian round on user counts
            return duckdp.select(con, "big", algo="count_gaussian" if algo == "threshold" else algo,
                                 max_contributions=100, seed=1, **budget)
        return duckdp.aggregate(con, "big", by="item", metrics=METRICS, keys=algo, max_contributions=100,
                                max_rows_per_key=1, seed=1, **budget)

    for algo in args.algos:
        calls: dict[tuple, list[tuple[float, float]]] = collections.defaultdict(list)
        totals: dict[str, list[float]] = collections.defaultdict(list)
        walls: dict[str, list[float]] = collections.defaultdict(list)
        released: dict[str, int] = {}
        loads = []
        for r in range(args.repeat):
            loads.append(os.getloadavg()[0])
            for kind in alternating(("select", "aggregate"), r):
                log.clear()
                before, wall = cpu_seconds(), time.perf_counter()
                out = call(kind, algo)
                totals[kind].append(cpu_seconds() - before)
                walls[kind].append(time.perf_counter() - wall)
                released[kind] = len(out)
                for i, (label, spent, waited) in enumerate(log):
                    calls[kind, i, label].append((spent, waited))
        sel, agg = (statistics.median(totals[k]) for k in ("select", "aggregate"))
        print(f"# {key_type} keys, memory_limit={args.memory_limit}, {args.threads} threads, {algo}, {args.repeat} "
              f"repeats, load average {min(loads):.1f}–{max(loads):.1f}: select {sel:.2f} CPU s "
              f"({', '.join(f'{x:.2f}' for x in totals['select'])}; {released['select']:,} keys), aggregate "
              f"{agg:.2f} ({', '.join(f'{x:.2f}' for x in totals['aggregate'])}; {released['aggregate']:,} keys), "
              f"ratio {agg / sel:.2f}× (paired: "
              f"{', '.join(f'{a / s:.2f}' for a, s in zip(totals['aggregate'], totals['select'], strict=True))}); "
              f"wall s: select {statistics.median(walls['select']):.2f}, aggregate "
              f"{statistics.median(walls['aggregate']):.2f}")
        for kind in ("select", "aggregate"):
            print(f"\n| {kind} # | call | CPU s (median) | wall s (median) | CPU / wall | runs (CPU s) |"
                  "\n|---:|---|---:|---:|---:|---|")
            for i, label in sorted({(i, label) for (k, i, label) in calls if k == kind}):
                spent = [c for c, _ in calls[kind, i, label]]
                waited = statistics.median(w for _, w in calls[kind, i, label])
                if max(spent) >= 0.01 or waited >= 0.01:
                    cpu = statistics.median(spent)
                    print(f"| {i} | {label[:48]} | {cpu:.3f} | {waited:.3f} | {cpu / max(waited, 1e-9):.1f} | "
                          f"{', '.join(f'{x:.2f}' for x in spent)} |")
        print(flush=True)
    con.close()


if __name__ == "__main__":
    main()
