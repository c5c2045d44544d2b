"""How to split a private GROUP BY's budget between key selection and the metrics, measured with
`duckdp.aggregate` itself on the data in ../shared/data (issue #20: "a documented default, measured").

For each dataset, selection (adaptive_sips, dpsips, keys="threshold"), ρ, Δ0 and selection share s, one
`duckdp.aggregate` call per trial (seeded) releases keys and their metrics; against the true, unbounded
per-key values it reports: keys released, the median relative error of each metric on the released keys,
and **useful keys** — released keys whose every metric is within 10 % of the truth, the number an analyst
can act on (more keys with useless numbers do not count; fewer keys with perfect numbers neither). The
default share (duckdp.privacy.aggregate.DEFAULT_SELECTION_SHARE; DEFAULT_THRESHOLD_SHARE for keys="threshold",
whose noisy users count is also the count and declared means' denominators) is the one with the most useful
keys summed over the grid, per selection kind.

Metrics: MovieLens 100k ratings (per movie) — users, ratings (count), mean rating in [1, 5]; the key-only
datasets (reddit, MovieLens latest-small) — users (there keys="threshold" has nothing to split: its noisy
count is the users metric, so it is not run). zCDP, δ = 1e-6, max_rows_per_key = 1.

    nice -n 10 python benchmarks/bench_aggregate_split.py                        # the grid below (~10 min)
    nice -n 10 python benchmarks/bench_aggregate_split.py --rhos 0.5 --trials 1 --datasets movielens_100k_ratings
    python benchmarks/bench_aggregate_split.py --datasets movielens_100k_ratings --keys threshold --not-null
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.privacy.aggregate import DEFAULT_SELECTION_SHARE, DEFAULT_THRESHOLD_SHARE  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SHARES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
KEYS = ("adaptive_sips", "dpsips", "threshold")
DELTA = 1e-6
# dataset → (metrics, SQL of the true per-key values: item + one column per metric)
DATASETS = {
    "movielens_100k_ratings": ({"raters": "users", "ratings": "count", "avg": ("mean", "rating", 1, 5)},
                               "SELECT item, count(DISTINCT user_id) AS raters, count(*) AS ratings, "
                               "avg(rating) AS avg FROM t GROUP BY item"),
    "reddit_1pct_unigrams": ({"users": "users"}, "SELECT item, count(DISTINCT user_id) AS users FROM t GROUP BY item"),
    "movielens_latest_small": ({"users": "users"},
                               "SELECT item, count(DISTINCT user_id) AS users FROM t GROUP BY item"),
}


def run(con: duckdb.DuckDBPyConnection, metrics: dict, truth: dict, keys: str, rho: float, d0: int, share: float,
        seed: int, not_null: list[str] | None = None) -> tuple[int, dict[str, float], int]:
    """One seeded aggregate: (keys released, median relative error per metric, useful keys)."""
    agg = duckdp.aggregate(con, "t", by="item", metrics=metrics, keys=keys, rho=rho, delta=DELTA,
                           max_contributions=d0, selection_share=share, seed=seed, not_null=not_null)
    out = agg.to_arrow()
    items = out.column("item").to_pylist()
    errs = {}
    for name in metrics:
        got = out.column(name).to_numpy(zero_copy_only=False).astype(float)
        true = np.array([truth[name][k] for k in items], dtype=float)
        errs[name] = np.abs(got - true) / true
    useful = int(np.sum(np.all([e <= 0.1 for e in errs.values()], axis=0))) if items else 0
    return len(items), {n: float(np.median(e)) if items else float("nan") for n, e in errs.items()}, useful


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--rhos", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--d0", type=int, nargs="+", default=[100, 300], help="Δ0 (max_contributions) values")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keys", nargs="+", default=list(KEYS), choices=list(KEYS), help="selections to run")
    ap.add_argument("--not-null", action="store_true",
                    help="declare MovieLens' rating not-null (its mean then divides by the row count, spec §3.1)")
    args = ap.parse_args()
    start = time.time()
    useful_total: dict[tuple[str, float], int] = defaultdict(int)
    print(f"duckdp.aggregate, zCDP, δ = {DELTA:g}, max_rows_per_key = 1, {args.trials} trials (medians); "
          f"'useful' = released keys with every metric within 10 % of the true value; current default share "
          f"{DEFAULT_SELECTION_SHARE} ({DEFAULT_THRESHOLD_SHARE} for keys='threshold')")
    for name in args.datasets:
        metrics, truth_sql = DATASETS[name]
        con = duckdb.connect()
        con.execute("SET threads = $t", {"t": args.threads})
        cols = "user_id, item" + (", rating" if "avg" in metrics else "")
        con.execute(f"CREATE TABLE t AS SELECT {cols} FROM read_parquet($p)", {"p": str(DATA / f"{name}.parquet")})
        rel = con.sql(truth_sql).fetchnumpy()
        truth = {m: dict(zip(rel["item"].tolist(), rel[m].tolist(), strict=True)) for m in metrics}
        for rho in args.rhos:
            for d0 in args.d0:
                print(f"\n### {name}: ρ = {rho:g}, Δ0 = {d0}\n")
                print("| keys | share | released | " + " | ".join(f"{m} err" for m in metrics) + " | useful |")
                print("|---|---:|---:|" + "---:|" * len(metrics) + "---:|")
                for keys in args.keys:
                    if keys == "threshold" and set(metrics.values()) == {"users"}:
                        continue        # the threshold's noisy count is the users metric: nothing to split
                    for s in SHARES:
                        declared = ["rating"] if args.not_null and "avg" in metrics else None
                        runs = [run(con, metrics, truth, keys, rho, d0, s, 1000 * t + 7, declared)
                                for t in range(args.trials)]
                        med = statistics.median
                        useful = med(r[2] for r in runs)
                        useful_total[keys, s] += int(useful)
                        errs = " | ".join(f"{med(r[1][m] for r in runs):.3f}" for m in metrics)
                        print(f"| {keys} | {s:.1f} | {med(r[0] for r in runs):.0f} | {errs} | {useful:.0f} |",
                              flush=True)
        con.close()
    print("\n### Useful keys summed over the grid, per share\n")
    print("| keys | " + " | ".join(f"{s:.1f}" for s in SHARES) + " | best |")
    print("|---|" + "---:|" * (len(SHARES) + 1))
    for keys in args.keys:
        row = [useful_total[keys, s] for s in SHARES]
        print(f"| {keys} | " + " | ".join(str(v) for v in row) + f" | {SHARES[int(np.argmax(row))]:.1f} |")
    print(f"\ntotal {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
