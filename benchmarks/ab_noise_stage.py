"""Paired before/after of the noise-stage speed-ups of issue #21 item 1 (branch strspeed), in one process:
`old` swaps in another checkout's `prf.noise`, SQL-computed integer counters and the GROUP BY … HAVING
collision check; `new` is this checkout. Releases alternate old/new (old first on even repeats) with
the raw-SQL floor once per repeat; medians of wall and CPU (user + system, all threads) and the median
paired CPU saving. Both must give the same seeded release first.

    git -C . archive <old commit> | tar -x -C /tmp/old
    python benchmarks/ab_noise_stage.py --old /tmp/old --rows 10000000 --key-type varchar --repeat 7
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import duckdp  # noqa: E402
from duckdp import noise_stage  # noqa: E402
from duckdp.stages import duckdb as duckdb_stages  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_timing import paired, report, synthetic_with_floor  # noqa: E402
from bench_speed import DELTA0  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="checkout whose duckdp/prf.py is `old`")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--key-type", choices=["bigint", "varchar"], default="bigint")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian", "dpsips"])
    args = ap.parse_args(argv)

    spec = importlib.util.spec_from_file_location("prf_old", args.old / "duckdp" / "prf.py")
    assert spec and spec.loader
    prf_old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prf_old)

    def old_noise(kind, key, round_tag, hi, lo, ranks=None, threads=None):
        return prf_old.noise(kind, prf_old.PRFKey(key.key, key.seeded), round_tag, hi, lo, ranks, threads)

    def old_collide(ctx, dictionary):
        return bool(ctx.scalar(f"SELECT count(*) FROM (SELECT _dp_id FROM temp.main.{dictionary} "
                               "GROUP BY _dp_id HAVING count(*) > 1)"))

    variants = {"new": (noise_stage.noise, noise_stage.counter_arrays, duckdb_stages.ids_collide),
                "old": (old_noise, lambda key_types: None, old_collide)}

    def use(name: str) -> None:
        noise_stage.noise, noise_stage.counter_arrays, duckdb_stages.ids_collide = variants[name]

    con, floor = synthetic_with_floor(args.rows, args.key_type, args.threads)

    def release(algo: str, seed: int | None = None):
        return duckdp.select(con, "synth", algo=algo, rho=0.1, delta=1e-5, max_contributions=DELTA0,
                             item_col="item", seed=seed)

    for algo in args.algos:
        outs = []
        for name in ("old", "new"):
            use(name)
            outs.append(release(algo, seed=5).to_arrow())
        if not outs[0].equals(outs[1]):
            raise SystemExit(f"{algo}: old and new seeded releases differ")

    res, loads = paired(args.repeat, floor, args.algos, ("old", "new"), lambda name, algo: release(algo), prepare=use)
    report(res, loads, f"{args.rows:,} rows, {args.key_type}, threads {args.threads}, {args.repeat} repeats",
           args.algos)


if __name__ == "__main__":
    main()
