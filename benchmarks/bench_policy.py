"""Released counts and wall times of the sequential mechanisms, against papers and the SQL floor.

    python benchmarks/bench_policy.py [--data DIR] [--seeds N] [--synthetic ROWS]

On ../shared/data (when present): reddit_1pct at the Gopi et al. reference settings (ε = 3,
δ = e^-10, Δ0 = 100; numbers from the authors' code in the data README) and IMDb at the DP-SIPS
Table 2 settings (ρ = 0.1, δ = 1e-5 for the Gaussian ones; ε = 1.7, δ = 8.1142e-5 for the
Laplace ones, the paper's GW setting) and at ε = 1, δ = 1e-5. `--synthetic` adds a DP-SIPS-recipe
table. The floor is the plain per-key user-count query on the same table, no privacy machinery.
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import duckdb

import duckdp
import duckdp.mechanisms
from duckdp.datasets import create_synthetic

GAUSSIAN = ("policy_gaussian", "policy_gaussian_l1")
ALGOS = ("policy_gaussian", "policy_gaussian_l1", "policy_laplace", "gw")
REDDIT_REF = {"policy_gaussian": (5.0, 341), "policy_gaussian_l1": (5.0, 371), "policy_laplace": (3.0, 161),
              "gw": (3.0, 231)}
IMDB_PAPER = {"policy_gaussian": 5845, "gw": 3005}     # DP-SIPS Table 2: DPSU; GW on deduplicated IMDb


def floor_seconds(con, table: str) -> float:
    start = time.perf_counter()
    con.sql(f"SELECT item, count(DISTINCT user_id) FROM {table} GROUP BY item").to_arrow_table()
    return time.perf_counter() - start


def run(con, table, algo, seeds, **kw) -> tuple[float, float]:
    """Mean released count and mean wall time over `seeds` seeded runs."""
    counts, times = [], []
    for seed in range(seeds):
        start = time.perf_counter()
        # gw and policy_gaussian_l1 lack an established guarantee: run only as published baselines
        opt = {"allow_unproven": True} if duckdp.mechanisms.get(algo).unproven else {}
        counts.append(len(duckdp.select(con, table, algo=algo, max_contributions=100, seed=seed, **kw, **opt)))
        times.append(time.perf_counter() - start)
    return sum(counts) / seeds, sum(times) / seeds


def row(dataset, setting, algo, count, seconds, floor, reference="") -> None:
    print(f"{dataset:<10} {setting:<26} {algo:<19} {count:>9.1f} {reference:>10} {seconds:>8.2f}s "
          f"{seconds / floor:>7.1f}×")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--synthetic", type=int, default=0, help="rows of a DP-SIPS synthetic table (0: skip)")
    args = ap.parse_args()
    con = duckdb.connect()
    print(f"{'dataset':<10} {'setting':<26} {'algo':<19} {'released':>9} {'reference':>10} {'time':>9} {'/floor':>8}")

    reddit = args.data / "reddit_1pct_unigrams.parquet"
    if reddit.exists():
        con.execute("CREATE TABLE reddit AS SELECT * FROM read_parquet($p)", {"p": str(reddit)})
        floor = floor_seconds(con, "reddit")
        for algo in ALGOS:
            alpha, ref = REDDIT_REF[algo]
            count, secs = run(con, "reddit", algo, args.seeds, epsilon=3, delta=math.exp(-10), alpha=alpha)
            row("reddit", f"ε=3 δ=e^-10 α={alpha:g}", algo, count, secs, floor, f"{ref} (code)")

    imdb = args.data / "imdb_unigrams.parquet"
    if imdb.exists():
        con.execute("CREATE TABLE imdb AS SELECT * FROM read_parquet($p)", {"p": str(imdb)})
        floor = floor_seconds(con, "imdb")
        for algo in ALGOS:
            zcdp = dict(rho=0.1, delta=1e-5) if algo in GAUSSIAN else dict(epsilon=1.7, delta=8.1142e-5)
            label = "ρ=0.1 δ=1e-5" if algo in GAUSSIAN else "ε=1.7 δ=8.1142e-5"
            count, secs = run(con, "imdb", algo, args.seeds, **zcdp)
            row("imdb", label, algo, count, secs, floor, f"{IMDB_PAPER[algo]} (paper)" if algo in IMDB_PAPER else "")
        for algo in ALGOS:
            count, secs = run(con, "imdb", algo, args.seeds, epsilon=1, delta=1e-5)
            row("imdb", "ε=1 δ=1e-5", algo, count, secs, floor)

    if args.synthetic:
        create_synthetic(con, "synthetic", args.synthetic, seed=0)
        floor = floor_seconds(con, "synthetic")
        for algo in ALGOS:
            count, secs = run(con, "synthetic", algo, args.seeds, epsilon=1, delta=1e-5)
            row(f"syn{args.synthetic / 1e6:g}M", "ε=1 δ=1e-5", algo, count, secs, floor)


if __name__ == "__main__":
    main()
