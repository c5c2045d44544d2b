"""The metrics' statements of aggregate(keys=<algo>) before and after stop 30, paired in one process (issue #20
"Engines and scale"), on bench_large.py's table `big` (BIGINT keys) with the released keys of a seeded aggregate:

  before: restrict on IS NOT DISTINCT FROM, min_by with FILTER (WHERE v IS NOT NULL), the sized pairs stored, their
      truncation stored as kept pairs, the per-key sums over those;
  after: restrict on `=`, min_by alone (DuckDB's skips NULL arguments), the sized pairs stored, the per-key sums
      over their truncation read in place.

The statements follow agg_rows / agg_pairs / stage_sized / stage_truncate / agg_measures for m = 1 and a value
column (salts fixed). Per variant: CPU seconds (user + system, all threads) of its statements, summed; variants
alternate per repeat.

    nice -n 10 python benchmarks/ab_aggregate_statements.py /tmp/big10m.duckdb --repeat 6
"""
from __future__ import annotations

import statistics
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_timing import alternating, big_table_parser, connect_big, timed  # noqa: E402
from bench_large import METRICS  # noqa: E402

ROWS = 'SELECT "user_id" AS _dp_user, "item" AS _dp_k0, "value" AS _dp_v0 FROM big'
HASH = ("CAST(CAST(hash(xor(hash(_dp_user, _dp_k0, _dp_v0), 7029355907734237289)) AS HUGEINT) "
        "- 9223372036854775808 AS BIGINT)")


def sized(match: str, sample: str) -> str:
    rows = f"SELECT r.* FROM ({ROWS}) AS r SEMI JOIN released AS k ON {match}"
    pairs = f"SELECT _dp_user, _dp_k0, {sample} AS _dp_x0 FROM ({rows}) GROUP BY _dp_user, _dp_k0"
    return (f"CREATE OR REPLACE TEMP TABLE s AS WITH pairs AS ({pairs}), sizes AS (SELECT _dp_user, count(*) AS "
            "_dp_size FROM pairs GROUP BY _dp_user) SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes "
            "USING (_dp_user)")


TRUNCATED = ("SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM s WHERE _dp_size <= 100 UNION ALL "
             "SELECT * EXCLUDE (_dp_size), 100::DOUBLE AS _dp_d FROM s WHERE _dp_size > 100 QUALIFY row_number() "
             "OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_k0), 6093595845637922980)))) <= 100")
MEASURES = ("SELECT _dp_k0, count(*) AS m0, count(_dp_x0) AS m1, sum(CAST(round_even(greatest(least(CAST(_dp_x0 AS "
            "DOUBLE), 500.0), 0.0) / 0.01, 0) AS HUGEINT)) AS m2 FROM ({kept}) GROUP BY _dp_k0")
DESIGNS = {
    "before": [sized("r._dp_k0 IS NOT DISTINCT FROM k._dp_k0",
                     f"min_by(_dp_v0, {HASH}) FILTER (WHERE _dp_v0 IS NOT NULL)"),
               "SELECT count(*) FROM s", f"CREATE OR REPLACE TEMP TABLE k AS {TRUNCATED}", "DROP TABLE s",
               MEASURES.format(kept="SELECT * FROM k"), "DROP TABLE k"],
    "after": [sized("r._dp_k0 = k._dp_k0", f"min_by(_dp_v0, {HASH})"), "SELECT count(*) FROM s",
              MEASURES.format(kept=TRUNCATED), "DROP TABLE s"],
}


def main() -> None:
    ap = big_table_parser(__doc__)
    args = ap.parse_args()
    con = connect_big(args, read_only=True)
    agg = duckdp.aggregate(con, "big", by="item", metrics=METRICS, keys="weighted_gaussian", max_contributions=100,
                           max_rows_per_key=1, seed=1, rho=0.1, delta=1e-5)
    con.register("released_arrow", agg.to_arrow().select(["item"]).rename_columns(["_dp_k0"]))
    con.execute("CREATE TEMP TABLE released AS SELECT * FROM released_arrow")
    cpu: dict[str, list[float]] = {d: [] for d in DESIGNS}
    for r in range(args.repeat):
        for design in alternating(list(DESIGNS), r):
            seconds = [timed(partial(lambda sql: con.execute(sql).fetchall(), sql))[1] for sql in DESIGNS[design]]
            cpu[design].append(sum(seconds))
            print(f"repeat {r} {design}: {' + '.join(f'{s:.2f}' for s in seconds)} = {sum(seconds):.2f} CPU s",
                  flush=True)
    saving = statistics.median(b - a for b, a in zip(cpu["before"], cpu["after"], strict=True))
    print(f"| {args.memory_limit} | {len(agg):,} keys | " + " | ".join(
        f"{statistics.median(cpu[d]):.2f} ({', '.join(f'{x:.2f}' for x in cpu[d])})" for d in DESIGNS)
        + f" | {saving:.2f} |")
    con.close()


if __name__ == "__main__":
    main()
