"""CPU seconds (user + system, all threads) of each statement a release runs, in call order, on the synthetic
table of bench_speed.py, and with `--heavy N` the same table plus one user (−1) holding N distinct keys, the
two tables alternated release by release in one process: what one heavy user costs each statement (issue #21
item 2). A "noise" row is one round's noise stage (its weights query, Arrow batches, PRF noise, decisions);
the others are RunContext calls by template. Unseeded releases, ρ = 0.1, δ = 1e-5, Δ0 = 100, 2 threads.

    python benchmarks/profile_calls.py --rows 2000000 --heavy 2000000 --repeat 5 --algos weighted_gaussian adaptive_sips
    python benchmarks/profile_calls.py --rows 10000000 --repeat 3 --algos adaptive_sips

Run it from another checkout's root with PYTHONPATH at that checkout to profile that code.
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path.cwd()))                          # the checkout to profile (PYTHONPATH too)
import duckdp  # noqa: E402
from duckdp import noise_stage  # noqa: E402
from duckdp import run as run_module  # noqa: E402
from duckdp.datasets import create_synthetic  # noqa: E402
from duckdp.stages import duckdb as duckdb_stages  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_speed import DELTA0, KEY_TYPES  # noqa: E402

log: list[tuple[str, float]] = []


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def wrap(name: str, fn: Callable) -> Callable:
    def timed(*args, **kwargs):
        before = cpu()
        try:
            return fn(*args, **kwargs)
        finally:
            log.append((name if name == "noise" else f"{name} {args[1]}", cpu() - before))
    return timed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--heavy", type=int, default=0, help="one user with this many distinct keys (0: none)")
    ap.add_argument("--key-type", choices=list(KEY_TYPES), default="bigint")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian", "adaptive_sips"])
    args = ap.parse_args(argv)

    for method in ("execute", "arrow", "fetch", "scalar"):
        setattr(run_module.RunContext, method, wrap(method, getattr(run_module.RunContext, method)))
    scan = wrap("noise", noise_stage.scan_noisy)
    noise_stage.scan_noisy = duckdb_stages.scan_noisy = scan

    con = duckdb.connect()
    create_synthetic(con, "synth_bigint", args.rows, seed=0)
    rebuild = KEY_TYPES[args.key_type][1] or "SELECT * FROM synth"
    con.execute("CREATE TABLE plain AS " + rebuild.replace("FROM synth", "FROM synth_bigint"))
    tables = ["plain"]
    if args.heavy:
        if args.key_type != "bigint":
            raise SystemExit("--heavy needs --key-type bigint")
        con.execute("CREATE TABLE heavy AS SELECT * FROM plain UNION ALL "
                    "SELECT -1 AS user_id, range AS item FROM range(1, $n + 1)", {"n": args.heavy})
        tables.append("heavy")
    con.execute(f"SET threads = {int(args.threads)}")
    item_col = KEY_TYPES[args.key_type][0]

    def release(table: str, algo: str) -> None:
        duckdp.select(con, table, algo=algo, rho=0.1, delta=1e-5, max_contributions=DELTA0,
                      item_col=item_col[0] if len(item_col) == 1 else item_col)

    for table in tables:                                     # warm-up
        for algo in args.algos:
            release(table, algo)
    calls: dict[tuple, list[float]] = collections.defaultdict(list)
    totals: dict[tuple, list[float]] = collections.defaultdict(list)
    loads = []
    for r in range(args.repeat):
        for table in tables if r % 2 == 0 else tables[::-1]:
            for algo in args.algos:
                log.clear()
                before = cpu()
                release(table, algo)
                totals[algo, table].append(cpu() - before)
                for i, (label, spent) in enumerate(log):
                    calls[algo, table, i, label].append(spent)
        loads.append(os.getloadavg()[0])
    heavy = f" + one user with {args.heavy:,} keys" if args.heavy else ""
    print(f"# {args.rows:,} rows{heavy}, {args.key_type}, {args.threads} threads, {args.repeat} repeats, "
          f"DuckDB {duckdb.__version__}, load average {min(loads):.1f}–{max(loads):.1f}")
    for algo in args.algos:
        line = f"\n{algo}: {statistics.median(totals[algo, 'plain']):.3f} CPU s"
        if args.heavy:
            with_user = totals[algo, "heavy"]
            cost = statistics.median(h - p for h, p in zip(with_user, totals[algo, "plain"], strict=True))
            line += f", with the user {statistics.median(with_user):.3f}, its cost (median paired) {cost:+.3f}"
        print(line + "\n")
        print("| # | call | " + " | ".join(f"{t} CPU s" for t in tables) + (" | difference |" if args.heavy else ""))
        print("|---:|---|" + "---:|" * (len(tables) + (1 if args.heavy else 0)))
        for i, label in sorted({(i, label) for (a, _t, i, label) in calls if a == algo}):
            spent = [statistics.median(calls.get((algo, t, i, label), [0.0])) for t in tables]
            if max(spent) >= 0.015:
                diff = f" {spent[1] - spent[0]:+.3f} |" if args.heavy else ""
                print(f"| {i} | {label[:40]} | " + " | ".join(f"{s:.3f}" for s in spent) + " |" + diff)


if __name__ == "__main__":
    main()
