"""aggregate(keys=<algo>) vs select(<algo>), before/after, paired in one process (issue #20 "Engines and scale": the
aggregate within 1.5× the select of the same mechanism): on bench_large.py's table `big`, each repeat runs the
seeded select of this checkout, then the seeded 4-metric aggregate of `--old` (another checkout, imported as
`duckdp_old` as ab_checkouts.py does) and of this checkout, old/new order alternated per repeat. Reported per
call: CPU seconds (user + system, all threads) and wall seconds, the aggregate/select CPU ratio, and whether
old and new released the same table (seeded releases must be identical). `--public-keys N` adds the aggregate
over a public key set, the N smallest keys of `big` (no selection; its "select" is weighted_gaussian's): the
call where the exact per-key noise is the largest share.

    git -C . archive <old commit> | tar -x -C /tmp/old
    nice -n 10 python benchmarks/ab_aggregate_select.py /tmp/big10m.duckdb --old /tmp/old --repeat 3 \\
        --algos weighted_gaussian adaptive_sips
    python benchmarks/ab_aggregate_select.py /tmp/big10m.duckdb --old /tmp/old --repeat 4 --algos weighted_gaussian \
        --public-keys 20000
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_checkouts import import_old  # noqa: E402
from ab_timing import alternating, big_table_parser, connect_big, timed  # noqa: E402
from bench_large import METRICS  # noqa: E402

BUDGET = {"rho": 0.1, "delta": 1e-5}


def main() -> None:
    ap = big_table_parser(__doc__)
    ap.add_argument("--old", type=Path, required=True, help="checkout (a git archive) whose duckdp is `old`")
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian"])
    ap.add_argument("--public-keys", type=int, default=0, help="also aggregate over the N smallest keys as public keys")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="duckdp_ab_") as folder:
        packages: dict[str, Any] = {"old": import_old(args.old, Path(folder)), "new": duckdp}
        con = connect_big(args)
        (key_type,), = con.sql("SELECT typeof(any_value(item)) FROM big").fetchall()
        print("| keys | limit | algo | select CPU s | aggregate old CPU s | aggregate new CPU s | old/select | "
              "new/select | wall s old / new | released |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|")
        runs = [(algo, algo) for algo in args.algos]
        if args.public_keys:
            public = con.sql("SELECT DISTINCT item FROM big ORDER BY item LIMIT $n",
                             params={"n": args.public_keys}).to_arrow_table()
            runs.append((f"{args.public_keys:,} public keys", public))
        for algo, keys in runs:
            cpu: dict[str, list[float]] = {"select": [], "old": [], "new": []}
            wall: dict[str, list[float]] = {"old": [], "new": []}
            same = True
            mechanism = algo if isinstance(keys, str) else "weighted_gaussian"
            for r in range(args.repeat):
                _, sc, _ = timed(partial(duckdp.select, con, "big", algo=mechanism, max_contributions=100, seed=1,
                                         **BUDGET))
                cpu["select"].append(sc)
                tables = {}
                for name in alternating(("old", "new"), r):
                    w, c, agg = timed(partial(packages[name].aggregate, con, "big", by="item", metrics=METRICS,
                                              keys=keys, max_contributions=100, max_rows_per_key=1, seed=1, **BUDGET))
                    cpu[name].append(c)
                    wall[name].append(w)
                    tables[name] = agg.to_arrow()
                same = same and tables["old"].equals(tables["new"])
                print(f"# repeat {r}: select {sc:.2f}, old {cpu['old'][-1]:.2f}, new {cpu['new'][-1]:.2f} CPU s",
                      flush=True)
            s, o, n = (statistics.median(cpu[k]) for k in ("select", "old", "new"))
            wo, wn = (statistics.median(wall[k]) for k in ("old", "new"))
            print(f"| {key_type} | {args.memory_limit} | {algo} | {s:.2f} | {o:.2f} | {n:.2f} | {o / s:.2f}× | "
                  f"{n / s:.2f}× | {wo:.2f} / {wn:.2f} | {tables['new'].num_rows:,} "
                  f"({'same' if same else 'DIFFERS'}) |", flush=True)
        con.close()


if __name__ == "__main__":
    main()
