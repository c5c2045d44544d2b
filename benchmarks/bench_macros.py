"""What the shell macros' keyed SHA-256 PRF costs per key, against the old unkeyed hash() path.

Per key, in DuckDB SQL over `range(N)` key ids (one salt):
  keyed word    duckdp_prf('N' ‖ hex16(salt) ‖ hex16(id)): sha256 of secret ‖ 33-byte message
  hash word     hash(salt, id), the old macros' counter (no secret: predictable)
  keyed noise   duckdp_gaussian_noise(0, 1, salt, id): keyed word → exact uniform → Φ⁻¹ (AS 241)
  hash noise    the old duckdp_gaussian_noise: Φ⁻¹ of ((hash(hash(salt, id)) >> 11) + 0.5)·2⁻⁵³
and two whole releases of duckdp_weighted_gaussian over N pairs: N single-key users (only the noise
is keyed) and N/100 users of 100 keys truncated to Δ0 = 10 (the truncation order keyed per pair).
Each query reduces with sum() so no result is materialised; median of `--repeats`
of wall time and of the process's CPU time (all threads; less sensitive to other load).

    nice -n 10 python benchmarks/bench_macros.py                 # 1M keys, 2 threads, 3 repeats
    nice -n 10 python benchmarks/bench_macros.py --keys 100000 --threads 1
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402

SALT = 0x0123456789ABCDEF
QUERIES = {
    "keyed word": ("SELECT sum(duckdp_prf('N' || duckdp_hex64($s::UBIGINT) || duckdp_hex64(i)) >> 32) "
                   "FROM range($n) r(i)"),
    "hash word": "SELECT sum(hash($s::UBIGINT, i::UBIGINT) >> 32) FROM range($n) r(i)",
    "keyed noise": "SELECT sum(duckdp_gaussian_noise(0, 1, $s::UBIGINT, i::UBIGINT)) FROM range($n) r(i)",
    "hash noise": ("SELECT sum(duckdp_ndtri(((hash(hash($s::UBIGINT, i::UBIGINT)) >> 11)::DOUBLE + 0.5e0)"
                   " * 1.1102230246251565e-16)) FROM range($n) r(i)"),
}


def timed(con: duckdb.DuckDBPyConnection, sql: str, params: dict, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `sql`."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        con.sql(sql, params=params).fetchall()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    con = duckdb.connect(config={"threads": args.threads})
    duckdp.install_macros(con)
    params = {"s": SALT, "n": args.keys}
    print(f"duckdb {duckdb.__version__}, {args.keys:,} keys, threads = {args.threads}, median of {args.repeats}")
    print(f"{'path':<14} {'wall s':>8} {'wall ns/key':>12} {'CPU ns/key':>11}")
    results = {name: timed(con, sql, params, args.repeats) for name, sql in QUERIES.items()}
    for name, (wall, cpu) in results.items():
        print(f"{name:<14} {wall:8.3f} {wall / args.keys * 1e9:12.0f} {cpu / args.keys * 1e9:11.0f}")
    print(f"keyed/hash CPU: word {results['keyed word'][1] / results['hash word'][1]:.0f}x, "
          f"noise {results['keyed noise'][1] / results['hash noise'][1]:.2f}x")
    # Whole releases over N pairs: N single-key users (no truncation: only the noise is keyed), and
    # N/100 users with 100 keys each truncated to Δ0 = 10 (the truncation order is keyed per pair).
    con.execute("CREATE TABLE t AS SELECT 'u' || i AS user_id, 'k' || i AS item FROM range($n) r(i)", {"n": args.keys})
    con.execute("CREATE TABLE t100 AS SELECT 'u' || (i // 100) AS user_id, 'k' || (i % 100 + 100 * (i // 10000)) "
                "AS item FROM range($n) r(i)", {"n": args.keys})
    for table, label, d0 in (("t", "1 key/user, Δ0 = 100", 100), ("t100", "100 keys/user, Δ0 = 10", 10)):
        wall, cpu = timed(con, f"SELECT count(*) FROM duckdp_weighted_gaussian('{table}', 'user_id', 'item', "
                               f"rho := 0.5, delta := 1e-6, max_contributions := {d0})", {}, args.repeats)
        print(f"duckdp_weighted_gaussian, {args.keys:,} pairs, {label}: {wall:.3f} s wall, "
              f"{wall / args.keys * 1e9:.0f} ns/pair wall, {cpu / args.keys * 1e9:.0f} ns/pair CPU")

if __name__ == "__main__":
    main()
