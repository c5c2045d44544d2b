"""Would one input scan make aggregate(keys=<algo>) cheaper? Paired, in one process, the statements that differ
between the two designs of the metrics' pairs (issue #20 "Engines and scale"), on a table from bench_large.py:

  two scans (duckdp today): the selection stores its distinct (user, key) pairs with |W_u| (stage_sized over
      stage_pairs); after it, the metrics re-read the input restricted to the released keys and group those rows
      into pairs with the row sample (agg_rows + agg_pairs, m = 1), stored with |W_u|.
  one scan: the selection's grouped pass carries each pair's value summary — count, min and max of the value
      (what decides, without a salt, the pairs whose one value *is* the sample; the rest would need the input
      again) — stored once; the selection's sized pairs and the metrics' sized pairs (restricted to the released
      keys) are read from that table, not from the input.
  one scan, sampled: the same, carrying the row sample itself (min_by under a salt), as it could only with the
      row sample's salt drawn before the selection — which changes seeded releases (no pair needs the input again).

Everything downstream (truncation windows, per-key measures, noise) reads the same stored pairs in both designs,
so these statements are the whole difference. The released keys are those of a seeded select(weighted_gaussian).
Per design: CPU seconds (user + system, all threads) of its three statements, summed; designs alternate per repeat.

    nice -n 10 python benchmarks/ab_one_scan.py /tmp/big10m.duckdb --memory-limit 2GB --repeat 2
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

ROWS = 'SELECT user_id AS _dp_user, item AS _dp_k0, "value" AS _dp_v0 FROM big'
SIZED = ("CREATE OR REPLACE TEMP TABLE {name} AS WITH pairs AS ({pairs}), sizes AS (SELECT _dp_user, count(*) AS "
         "_dp_size FROM pairs GROUP BY _dp_user) SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes "
         "USING (_dp_user)")
SAMPLE_EXPR = ("min_by(_dp_v0, CAST(CAST(hash(xor(hash(_dp_user, _dp_k0, _dp_v0), 7029355907734237289)) AS HUGEINT) "
               "- 9223372036854775808 AS BIGINT)) FILTER (WHERE _dp_v0 IS NOT NULL)")
SAMPLE = (f"SELECT _dp_user, _dp_k0, {SAMPLE_EXPR} AS _dp_x0 FROM ({ROWS}) AS r SEMI JOIN released AS k "
          "ON r._dp_k0 IS NOT DISTINCT FROM k._dp_k0 GROUP BY _dp_user, _dp_k0")
DESIGNS = {
    "two scans": [SIZED.format(name="sel", pairs="SELECT DISTINCT user_id AS _dp_user, item AS _dp_k0 FROM big"),
                  SIZED.format(name="met", pairs=SAMPLE)],
    "one scan": [f"CREATE OR REPLACE TEMP TABLE carried AS SELECT _dp_user, _dp_k0, count(*) AS _dp_n, "
                 f"min(_dp_v0) AS _dp_lo0, max(_dp_v0) AS _dp_hi0 FROM ({ROWS}) GROUP BY _dp_user, _dp_k0",
                 SIZED.format(name="sel", pairs="SELECT _dp_user, _dp_k0 FROM carried"),
                 SIZED.format(name="met", pairs="SELECT p.* FROM carried AS p SEMI JOIN released AS k "
                                                "ON p._dp_k0 IS NOT DISTINCT FROM k._dp_k0")],
    "one scan, sampled": [f"CREATE OR REPLACE TEMP TABLE carried AS SELECT _dp_user, _dp_k0, {SAMPLE_EXPR} AS _dp_x0 "
                          f"FROM ({ROWS}) GROUP BY _dp_user, _dp_k0",
                          SIZED.format(name="sel", pairs="SELECT _dp_user, _dp_k0 FROM carried"),
                          SIZED.format(name="met", pairs="SELECT p.* FROM carried AS p SEMI JOIN released AS k "
                                                         "ON p._dp_k0 IS NOT DISTINCT FROM k._dp_k0")],
}


def main() -> None:
    ap = big_table_parser(__doc__)
    args = ap.parse_args()
    con = connect_big(args, read_only=True)
    keys = duckdp.select(con, "big", algo="weighted_gaussian", max_contributions=100, seed=1, rho=0.1, delta=1e-5)
    con.register("released_arrow", keys.to_arrow().rename_columns(["_dp_k0"]))
    con.execute("CREATE TEMP TABLE released AS SELECT * FROM released_arrow")
    (key_type,), = con.sql("SELECT typeof(any_value(item)) FROM big").fetchall()
    cpu: dict[str, list[float]] = {d: [] for d in DESIGNS}
    for r in range(args.repeat):
        for design in alternating(list(DESIGNS), r):
            seconds = [timed(partial(con.execute, sql))[1] for sql in DESIGNS[design]]
            cpu[design].append(sum(seconds))
            print(f"{key_type} {args.memory_limit} repeat {r} {design}: "
                  f"{' + '.join(f'{s:.2f}' for s in seconds)} = {sum(seconds):.2f} CPU s", flush=True)
    print(f"| {key_type} | {args.memory_limit} | {len(keys):,} | "
          + " | ".join(f"{statistics.median(cpu[d]):.2f} ({', '.join(f'{x:.2f}' for x in cpu[d])})" for d in DESIGNS)
          + " |")
    con.close()


if __name__ == "__main__":
    main()
