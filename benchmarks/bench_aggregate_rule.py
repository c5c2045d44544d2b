"""Budget rule of shared measures (docs/specs/private-group-by.md §3.1): each distinct quantity gets the sum of
its readers' metric shares (duckdp's default) vs an even split over distinct quantities (emulated with
`metric_shares`), on MovieLens 100k with public keys (movies with ≥ 20 ratings, so selection plays no part) and
Δ0 = 1000 (no user truncated: the error is the noise alone). Prints the mean over seeds of each metric's median
relative error against the exact statistic.

    PYTHONPATH=$PWD nice -n 10 /work/venv/bin/python benchmarks/bench_aggregate_rule.py
"""
from __future__ import annotations

import duckdb
import numpy as np

import duckdp

DATA = "../shared/data/movielens_100k_ratings.parquet"
QUERIES = {   # metrics, and the metric_shares giving every distinct quantity the same share (m = 1)
    "users+mean": ({"u": "users", "a": ("mean", "rating", 1, 5)}, {"u": 1 / 3, "a": 2 / 3}),
    "users+count+mean": ({"u": "users", "c": "count", "a": ("mean", "rating", 1, 5)},
                         {"u": 1 / 6, "c": 1 / 6, "a": 2 / 3}),
    "users+sum+mean": ({"u": "users", "s": ("sum", "rating", 1, 5), "a": ("mean", "rating", 1, 5)},
                       {"u": 0.2, "s": 0.2, "a": 0.6}),
}


def main(seeds: int = 5) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE r AS SELECT * FROM '{DATA}'")
    truth = con.execute("SELECT item, count(DISTINCT user_id) AS u, count(*) AS c, sum(rating) AS s, "
                        "avg(rating) AS a FROM r GROUP BY item HAVING count(*) >= 20 ORDER BY item").fetchnumpy()
    keys = [int(k) for k in truth["item"]]
    for rho in (1.0, 10.0):
        for q, (metrics, even) in QUERIES.items():
            for rule, shares in (("readers' shares (default)", None), ("even over quantities", even)):
                errs: dict[str, list[float]] = {m: [] for m in metrics}
                for seed in range(seeds):
                    t = duckdp.aggregate(con, "r", by="item", metrics=metrics, keys=keys, rho=rho, delta=1e-6,
                                         max_contributions=1000, metric_shares=shares, seed=seed).to_arrow()
                    for m in metrics:
                        x, y = t.column(m).to_numpy().astype(float), truth[m].astype(float)
                        errs[m].append(float(np.median(np.abs(x - y) / y)))
                print(f"rho={rho:<4} {q:17s} {rule:26s} "
                      + "  ".join(f"{m}={np.mean(v):.4f}" for m, v in errs.items()), flush=True)


if __name__ == "__main__":
    main()
