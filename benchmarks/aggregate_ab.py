"""Paired error A/B of `duckdp.aggregate` between two checkouts over many seeds (stop 33: a plan change, such as
a new link between measures, shows as each metric's error ratio with the seeds paired).

`old` is another checkout's package, imported as `duckdp_old` (ab_checkouts.import_old), `new` is this checkout;
both run the same call (dataset, metrics, keys, budget, Δ0, seed) on the same data. Per seed and arm: the median
relative error |noisy − true| / |true| of each metric over the keys the arm released, against the exact
unbounded statistic, and whether both arms released the same keys. Reported per keys mode and metric: the median
over seeds of each arm's error and the ratio of medians new / old with a 95 % bootstrap over seeds
(mean_gap_opendp.spread). Datasets as benchmarks/bench_aggregate.py: purchases (synthetic, amount ∈ [0, 500])
or MovieLens 100k (rating ∈ [1, 5]); the value column is declared not-null unless --nullable.

    git archive <old commit> | tar -x -C /tmp/old
    python benchmarks/aggregate_ab.py --old /tmp/old --dataset purchases --metrics users sum --keys dpsips threshold
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import duckdb
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from ab_checkouts import import_old  # noqa: E402
from bench_aggregate import MOVIELENS, _quote, dataset_spec, make_purchases, truth  # noqa: E402
from mean_gap_opendp import med, rel_errs, spread  # noqa: E402

import duckdp  # noqa: E402

KINDS = ("users", "count", "sum", "mean")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="checkout (a git archive) whose duckdp is `old`")
    ap.add_argument("--dataset", choices=("purchases", "movielens"), default="purchases")
    ap.add_argument("--rows", type=int, default=1_000_000, help="purchases rows")
    ap.add_argument("--metrics", nargs="+", choices=KINDS, default=["users", "sum"])
    ap.add_argument("--keys", nargs="+", default=["dpsips", "threshold"], help="keys= modes (algorithms, threshold)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--max-contributions", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--nullable", action="store_true", help="declare no column not-null")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="duckdp_aggab_") as folder:
        tmp = Path(folder)
        packages = {"old": import_old(args.old, tmp / "old"), "new": duckdp}
        if args.dataset == "purchases":
            path = tmp / "purchases.parquet"
            make_purchases(args.rows, path)
        else:
            path = MOVIELENS
        spec = dataset_spec(args.dataset, str(path), args.max_contributions)
        con = duckdb.connect()
        con.execute(f"CREATE VIEW src AS SELECT * FROM read_parquet('{_quote(str(path))}')")
        true = truth(spec)
        v, lo, hi = spec["value"], spec["lower"], spec["upper"]
        metrics = {k: (k if k in ("users", "count") else (k, v, lo, hi)) for k in args.metrics}
        print(f"{args.dataset}, metrics {args.metrics}, ε = {args.epsilon}, δ = {args.delta}, Δ0 = "
              f"{args.max_contributions}, {args.seeds} seeds, not_null: {None if args.nullable else v}\n")
        print("| keys | metric | same keys | old err | new err | new / old [95 %] |")
        print("|---|---|---:|---:|---:|---|")
        for keys in args.keys:
            errs: dict[str, list[dict]] = {"old": [], "new": []}
            same = 0
            for seed in range(1, args.seeds + 1):
                outs = {}
                for name, pkg in packages.items():
                    agg = pkg.aggregate(con, "src", by=spec["key"], user_col=spec["user"], metrics=metrics,
                                        keys=keys, epsilon=args.epsilon, delta=args.delta,
                                        max_contributions=args.max_contributions, seed=seed,
                                        not_null=None if args.nullable else v)
                    t = agg.to_arrow().to_pydict()
                    outs[name] = {str(key): {k: float(t[k][i]) for k in args.metrics}
                                  for i, key in enumerate(t[spec["key"]])}
                    errs[name].append({k: med(rel_errs(outs[name], true, outs[name], k)) for k in args.metrics})
                same += outs["old"].keys() == outs["new"].keys()
            for k in args.metrics:
                a, b = [e[k] for e in errs["old"]], [e[k] for e in errs["new"]]
                s = spread(b, a)
                print(f"| {keys} | {k} | {same}/{args.seeds} | {np.median(a):.4f} | {np.median(b):.4f} | "
                      f"{s['ratio']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}] |")


if __name__ == "__main__":
    main()
