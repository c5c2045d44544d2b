"""Paired eager vs lazy noise for keys no user kept (issue #21 item 2: skewed users), in one process.

One synthetic table (duckdp.datasets, BIGINT keys) and the same table plus one user holding N distinct
keys (items 1..N, user −1). On each, per repeat and in alternating order: weighted_gaussian (no lazy
path: the reference for what the heavy user's rows cost), and MAD2R and adaptive SIPS each eager (their
`mad2r_lazy` / `lazy_rounds` patched to None) and lazy (adaptive SIPS as shipped; MAD2R with its cost rule
overridden, `LAZY_SHARE` = 0), MAD2R lazy with round 2 over every stored pair ("unpruned": `pruned` patched to
the identity) and MAD2R as shipped ("rule": its cost rule picks eager or lazy), seeded (ρ = 0.1, δ = 1e-5, Δ0 = 100);
all variants of a mechanism must release the same keys. Reported: median wall and CPU seconds (user + system, all
threads) per table, and the heavy user's cost (with − without it) per variant.

    python benchmarks/ab_lazy_noise.py --rows 2000000 --heavy 2000000 --threads 2 --repeat 3
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from unittest import mock

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import duckdp  # noqa: E402
from duckdp.datasets import create_synthetic  # noqa: E402
from duckdp.mechanisms.adaptive_sips import duckdb as adaptive  # noqa: E402
from duckdp.mechanisms.mad import duckdb as mad  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_timing import alternating, timed  # noqa: E402

DELTA0 = 100
VARIANTS = [("weighted_gaussian", "-"), ("mad2r", "eager"), ("mad2r", "unpruned"), ("mad2r", "lazy"),
            ("mad2r", "rule"), ("adaptive_sips", "eager"), ("adaptive_sips", "lazy")]
EAGER = {"mad2r": (mad, "mad2r_lazy"), "adaptive_sips": (adaptive, "lazy_rounds")}
UNPRUNED = {"mad2r": (mad, "pruned")}      # lazy, round 2 over every stored pair (the pruning undone)


def run(con: duckdb.DuckDBPyConnection, table: str, algo: str, mode: str) -> tuple[float, float, list]:
    """(wall s, CPU s, released keys) of one seeded release."""
    patches = [mock.patch.object(*EAGER[algo], lambda *a: None)] if mode == "eager" else \
        [mock.patch.object(*UNPRUNED[algo], lambda engine, pairs, *rest: pairs)] if mode == "unpruned" else []
    if algo == "mad2r" and mode in ("lazy", "unpruned"):
        patches.append(mock.patch.object(mad, "LAZY_SHARE", 0.0))      # lazy whatever the cost rule says
    for patch in patches:
        patch.start()
    try:
        wall, cpu, out = timed(lambda: duckdp.select(con, table, algo=algo, rho=0.1, delta=1e-5,
                                                     max_contributions=DELTA0, seed=1))
    finally:
        for patch in patches:
            patch.stop()
    return wall, cpu, sorted(out.to_arrow().column("item").to_pylist())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--heavy", type=int, default=2_000_000, help="distinct keys of the added user")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.threads)}")
    create_synthetic(con, "plain", args.rows, seed=0)
    con.execute("CREATE TABLE skewed AS SELECT * FROM plain UNION ALL "
                "SELECT -1 AS user_id, range AS item FROM range(1, $n + 1)", {"n": args.heavy})
    times: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for r in range(args.repeat):
        for table in ("plain", "skewed"):
            released: dict[str, list] = {}
            for algo, mode in alternating(VARIANTS, r):
                wall, cpu, keys = run(con, table, algo, mode)
                times.setdefault((table, algo, mode), []).append((wall, cpu))
                if algo in released and released[algo] != keys:
                    raise SystemExit(f"{algo} on {table}: its variants' releases differ")
                released[algo] = keys
            print(f"repeat {r}, {table}: " + ", ".join(f"{a} {m} {times[table, a, m][-1][0]:.2f}s"
                                                       for a, m in VARIANTS), flush=True)
    print(f"\n{args.rows:,} rows, heavy user {args.heavy:,} keys, {args.threads} threads, median of {args.repeat}\n")
    print("| mechanism | noise | without: wall s / CPU s | with: wall s / CPU s | heavy user: wall s / CPU s |")
    print("|---|---|---:|---:|---:|")
    for algo, mode in VARIANTS:
        med = {t: [statistics.median(x[i] for x in times[t, algo, mode]) for i in (0, 1)] for t in ("plain", "skewed")}
        print(f"| {algo} | {mode} | {med['plain'][0]:.2f} / {med['plain'][1]:.2f} | "
              f"{med['skewed'][0]:.2f} / {med['skewed'][1]:.2f} | "
              f"{med['skewed'][0] - med['plain'][0]:+.2f} / {med['skewed'][1] - med['plain'][1]:+.2f} |")


if __name__ == "__main__":
    main()
