"""Per-movie stddev of ratings on MovieLens 100k through duckdp.aggregate (variance/stddev metrics, spec §3.1
"Spreads"): the median absolute error of the released stddev against the raw per-movie stddev, on all released
movies and on those with ≥ 200 raters, how often the raw stddev lies inside the 95 % interval, and the mean's
error beside it; 5 seeds, ρ = 0.5, δ = 1e-6, Δ0 = 50, rating declared not-null.

    python benchmarks/movielens_spread.py [--data ../shared/data/movielens_100k_ratings.parquet]
"""
from __future__ import annotations

import argparse

import duckdb
import numpy as np

import duckdp

METRICS = {"raters": "users", "avg": ("mean", "rating", 1, 5), "sd": ("stddev", "rating", 1, 5)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data/movielens_100k_ratings.parquet")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT * FROM read_parquet(?)", [args.data])
    truth = {k: (n, m, s) for k, n, m, s in con.sql(
        "SELECT item, count(DISTINCT user_id), avg(rating), stddev_pop(rating) FROM r GROUP BY item").fetchall()}
    for keys in ("adaptive_sips", "threshold"):
        rows = []
        for seed in range(1, args.seeds + 1):
            agg = duckdp.aggregate(con, "r", by="item", user_col="user_id", metrics=METRICS, keys=keys, rho=0.5,
                                   delta=1e-6, max_contributions=50, not_null="rating", confidence=0.95, seed=seed)
            for x in agg.to_arrow().to_pylist():
                n, m, s = truth[x["item"]]
                rows.append((n, abs(x["sd"] - s), x["sd_low"] <= s <= x["sd_high"], abs(x["avg"] - m)))
        a = np.array(rows, dtype=float)
        big = a[:, 0] >= 200
        print(f"{keys}: {len(a) / args.seeds:.0f} movies/seed; stddev abs error median {np.median(a[:, 1]):.3f} "
              f"(movies with ≥ 200 raters: {np.median(a[big, 1]):.3f}, {big.sum() / args.seeds:.0f}/seed); raw "
              f"stddev inside the 95 % interval {a[:, 2].mean():.2%}; mean abs error median {np.median(a[:, 3]):.3f}")


if __name__ == "__main__":
    main()
