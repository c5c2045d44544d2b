"""Exact discrete Gaussian sampler speed (duckdp/discrete.py): draws/s of `discrete_gaussian_array`, one
stream per key, against the Fraction sampler it replaced (tests/reference_discrete.py, the test oracle),
for several σ. Both are timed in CPU seconds of this process (`time.process_time`) as well as wall time,
so a shared machine's load shows in the wall column only; each row also checks the two agree draw by draw.

    nice -n 10 python benchmarks/bench_discrete.py                 # 3000 keys per σ (~1 min)
    nice -n 10 python benchmarks/bench_discrete.py --keys 20000 --sigmas 1 1e6
    nice -n 10 python benchmarks/bench_discrete.py --keys 200000 --workers 2 --no-reference

`--workers N` adds the wall draws/s of duckdp.draw_pool.DrawPool(N) (worker processes, started inside the timing)
and checks its draws equal the in-process ones; `--no-reference` skips the slow Fraction sampler.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from reference_discrete import discrete_gaussian_array as reference_array  # noqa: E402

from duckdp.discrete import discrete_gaussian_array  # noqa: E402
from duckdp.draw_pool import DrawPool  # noqa: E402
from duckdp.prf import PRFKey  # noqa: E402

SIGMAS = (0.3, 1.0, 7.5, 1e3, 4605.236852654758, 1e6)


def _timed(fn, *args):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.process_time() - c, time.perf_counter() - w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=3000, help="draws (keys) per σ")
    ap.add_argument("--sigmas", type=float, nargs="+", default=SIGMAS)
    ap.add_argument("--workers", type=int, default=0, help="also time DrawPool(N) (wall)")
    ap.add_argument("--no-reference", action="store_true", help="skip the Fraction sampler")
    args = ap.parse_args()
    key = PRFKey.from_seed(1).derive(b"aggm", 1)
    hi = np.zeros(args.keys, np.uint64)
    lo = np.arange(args.keys, dtype=np.uint64)
    pool = f" DrawPool({args.workers}) wall | equal |" if args.workers else ""
    print(f"| σ | old draws/s (CPU) | new draws/s (CPU) | speed-up (CPU) | old wall | new wall | equal |{pool}")
    print("|---|---|---|---|---|---|---|" + ("---|---|" if args.workers else ""))
    for sigma in args.sigmas:
        n = args.keys
        new, new_cpu, new_wall = _timed(discrete_gaussian_array, key, hi, lo, sigma)
        if args.no_reference:
            row = f"| {sigma:g} | – | {n / new_cpu:,.0f} | – | – | {n / new_wall:,.0f} | – |"
        else:
            ref, ref_cpu, ref_wall = _timed(reference_array, key, hi, lo, sigma)
            row = (f"| {sigma:g} | {n / ref_cpu:,.0f} | {n / new_cpu:,.0f} | {ref_cpu / new_cpu:.1f}× | "
                   f"{n / ref_wall:,.0f} | {n / new_wall:,.0f} | {np.array_equal(ref, new)} |")
        if args.workers:
            with DrawPool(args.workers) as workers:
                drawn, _, wall = _timed(workers.draw, key, hi, lo, sigma)
            row += f" {n / wall:,.0f} | {np.array_equal(drawn, new)} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
