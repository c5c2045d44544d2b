"""Probe (issue #21 item 1, "truncation prefix"): can a hash-threshold prefix make Δ0 truncation cheaper?

The truncation's keyed hash is uniform on [0, 2⁶⁴), so a user with n > Δ0 pairs has about Δ0 pairs below
Δ0/n of the range. Ranking only the pairs below t(n) = 2⁶⁴·(Δ0 + 4√Δ0 + 4)/n — and every pair of the few users
with fewer than Δ0 there (the fallback) — keeps exactly the pairs of stage_truncate_window.sql. This times, on
bench_speed's synthetic table (10M rows, Δ0 = 100), the users-over-Δ0 part of the truncation (the window; the
users within Δ0 cost ≈ 0.04 CPU s) three ways, CPU seconds of this process, interleaved repeats:

- current: stage_truncate_window.sql as the engine renders it (DuckDB's per-user top-N, arg_min(…, Δ0));
- prefix, exact: candidates below t(n) ranked, fallback users ranked in full (anti/semi join on the short users);
- prefix, no fallback: the candidates alone — NOT exact, the lower bound of any prefix scheme's cost;
- the same ranked by a rank() Window (DuckDB sorts them; NOT exact either: ties, no fallback);

each carrying `payload` extra columns through the top-N (0: weighted_gaussian's pairs; 1: MAD2R's second round
and adaptive SIPS's rounds carry a struct of two columns). It checks the exact variant keeps the same pairs.

    python benchmarks/probe_truncation_prefix.py --rows 10000000 --threads 2 --repeat 3
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from duckdp.datasets import create_synthetic  # noqa: E402

H = "hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))"          # stage_truncation_order.sql, BIGINT keys
T = "(($max_contributions + 4 * sqrt($max_contributions) + 4) / _dp_size * 18446744073709551615::DOUBLE)"
CURRENT = f"""SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized
WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row({H})) <= $max_contributions"""
EXACT = f"""WITH heavy AS (
  SELECT *, {H} AS _dp_h FROM sized WHERE _dp_size > $max_contributions
), cand AS (
  SELECT * FROM heavy WHERE _dp_h::DOUBLE < {T}
), short AS (        -- users with fewer than Δ0 candidates: ranked in full
  SELECT _dp_user FROM cand GROUP BY _dp_user HAVING count(*) < $max_contributions
)
SELECT * EXCLUDE (_dp_size, _dp_h), $max_contributions::DOUBLE AS _dp_d FROM cand ANTI JOIN short USING (_dp_user)
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(_dp_h)) <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size, _dp_h), $max_contributions::DOUBLE AS _dp_d FROM heavy SEMI JOIN short USING (_dp_user)
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(_dp_h)) <= $max_contributions"""
NO_FALLBACK = f"""SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized
WHERE _dp_size > $max_contributions AND {H}::DOUBLE < {T}
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row({H})) <= $max_contributions"""
NO_FALLBACK_RANK = f"""SELECT * EXCLUDE (_dp_size, _dp_h), $max_contributions::DOUBLE AS _dp_d FROM (
  SELECT *, {H} AS _dp_h FROM sized WHERE _dp_size > $max_contributions AND {H}::DOUBLE < {T})
QUALIFY rank() OVER (PARTITION BY _dp_user ORDER BY _dp_h) <= $max_contributions"""
VARIANTS = {"current": CURRENT, "prefix, exact": EXACT, "prefix, no fallback (not exact)": NO_FALLBACK,
            "prefix, no fallback, rank() Window (not exact)": NO_FALLBACK_RANK}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    create_synthetic(con, "synth", args.rows, seed=0)
    con.execute("""CREATE TABLE sized0 AS
      WITH pairs AS (SELECT DISTINCT user_id AS _dp_user, item AS _dp_k0 FROM synth),
      sizes AS (SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user)
      SELECT pairs.*, _dp_size FROM pairs JOIN sizes USING (_dp_user)""")
    con.execute("CREATE TABLE sized1 AS SELECT _dp_user, _dp_k0, (_dp_k0 % 7)::DOUBLE AS _dp_x, _dp_size FROM sized0")
    params = {"max_contributions": 100, "trunc_salt": 0x1234_5678_9ABC_DEF0}
    (pairs, heavy_pairs, heavy), = con.sql(
        "SELECT count(*), count(*) FILTER (WHERE _dp_size > 100), "
        "count(DISTINCT _dp_user) FILTER (WHERE _dp_size > 100) FROM sized0").fetchall()
    print(f"{args.rows:,} rows, {pairs:,} pairs; {heavy:,} users over Δ0 = 100 hold {heavy_pairs:,}; "
          f"{args.threads} threads\n")
    print("| payload | variant | median CPU s | median wall s | kept pairs | same pairs as current |")
    print("|---|---|---:|---:|---:|---|")
    for payload in (0, 1):
        cols = "_dp_user, _dp_k0" + (", _dp_x" if payload else "")
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
        kept = {}
        for _ in range(args.repeat):
            for name, sql in VARIANTS.items():
                query = f"SELECT count(*), sum(hash({cols})) FROM ({sql.replace('FROM sized', f'FROM sized{payload}')})"
                c0, w0 = cpu(), time.perf_counter()
                kept[name] = con.sql(query, params=params).fetchall()[0]
                times[name].append((cpu() - c0, time.perf_counter() - w0))
        for name in VARIANTS:
            c, w = (statistics.median(x) for x in zip(*times[name], strict=True))
            print(f"| {payload} | {name} | {c:.2f} | {w:.2f} | {kept[name][0]:,} | {kept[name] == kept['current']} |")


if __name__ == "__main__":
    main()
