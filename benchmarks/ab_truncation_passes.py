"""Paired A/B, in one process, of the Δ0 truncation's pass count (DuckDBStages.truncate): "before" sizes every
truncation by the input's rows (the old rule), "after" by the stored pairs' count where the input's rows ask for
passes. Same table and connection, the modes alternated per repeat (before/after, then after/before); per call
select and aggregate CPU seconds (all threads: user + system of the process) and wall seconds, the
aggregate/select ratios, and whether the two modes released the same table.

    python benchmarks/bench_large.py --aggregate --rows 10000000 --threads 2 --memory-limit 2GB \\
        --algos weighted_gaussian --db /tmp/big10m.duckdb                       # build the table once
    nice -n 10 python benchmarks/ab_truncation_passes.py /tmp/big10m.duckdb --memory-limit 400MB --repeat 2
"""
from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.stages.duckdb import DuckDBStages  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_timing import alternating, big_table_parser, connect_big, timed  # noqa: E402

METRICS = {"users": "users", "rows": "count", "amount": ("sum", "value", 0, 500),
           "avg_amount": ("mean", "value", 0, 500)}
AFTER = DuckDBStages.passes_for


def before(self: DuckDBStages, rows: int) -> int:
    """The old rule: once the run's count from the input's rows is known, every truncation uses it."""
    return self._passes if self._passes is not None else AFTER(self, rows)


def main() -> None:
    ap = big_table_parser(__doc__)
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian"])
    args = ap.parse_args()
    con = connect_big(args)
    (key_type,), = con.sql("SELECT typeof(any_value(item)) FROM big").fetchall()
    print("| keys | limit | algo | rule | select CPU s (wall) | aggregate CPU s (wall) | CPU ratio | wall ratio "
          "| released |")
    print("|---|---|---|---|---:|---:|---:|---:|---|")
    for algo in args.algos:
        releases: dict[str, pa.Table] = {}
        for r in range(args.repeat):
            for mode in alternating(("before", "after"), r):
                DuckDBStages.passes_for = before if mode == "before" else AFTER   # type: ignore[method-assign]
                sw, sc, _ = timed(partial(duckdp.select, con, "big", algo=algo, max_contributions=100, seed=1,
                                          rho=0.1, delta=1e-5))
                aw, ac, agg = timed(partial(duckdp.aggregate, con, "big", by="item", metrics=METRICS, keys=algo,
                                            max_contributions=100, max_rows_per_key=1, seed=1, rho=0.1, delta=1e-5))
                table = agg.to_arrow()
                same = "" if not releases else (" (same)" if all(t.equals(table) for t in releases.values())
                                                else " (DIFFERS)")
                releases[mode] = table
                print(f"| {key_type} | {args.memory_limit} | {algo} | {mode} | {sc:.1f} ({sw:.1f}) | "
                      f"{ac:.1f} ({aw:.1f}) | {ac / sc:.2f}× | {aw / sw:.2f}× | {table.num_rows:,}{same} |", flush=True)
        DuckDBStages.passes_for = AFTER   # type: ignore[method-assign]
    con.close()


if __name__ == "__main__":
    main()
