"""Paired before/after of two whole duckdp checkouts in one process (issue #21 item 1: mad, mad2r, adaptive_sips
speed): `old` is another checkout's package, imported as `duckdp_old` (its template loader pointed at its own
sql/ folders), `new` is this checkout. Per repeat the raw-SQL floor of bench_speed.py runs once, then each
mechanism's old and new releases alternate (old first on even repeats), so both arms see the same load.
Reported: medians of wall and CPU (user + system, all threads) with their ratios to the floor, the median paired
CPU saving. Both arms must give the same seeded release first.

    git -C . archive <old commit> | tar -x -C /tmp/old
    python benchmarks/ab_checkouts.py --old /tmp/old --rows 10000000 --key-type bigint --algos mad --repeat 5
    python benchmarks/ab_checkouts.py --old /tmp/old --rows 2000000 --heavy 2000000 --algos adaptive_sips
"""
from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import duckdp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_timing import paired, report, synthetic_with_floor  # noqa: E402
from bench_speed import DELTA0, KEY_TYPES  # noqa: E402


def import_old(checkout: Path, folder: Path) -> ModuleType:
    """`checkout`'s duckdp package as `duckdp_old`: copied under `folder` with its sql/ beside it (where the
    template loader's source-checkout fallback finds it) and its loader's package name renamed."""
    shutil.copytree(checkout / "duckdp", folder / "duckdp_old")
    shutil.copytree(checkout / "sql", folder / "sql")
    templates = folder / "duckdp_old" / "templates.py"
    templates.write_text(templates.read_text().replace('files("duckdp")', 'files("duckdp_old")'))
    sys.path.insert(0, str(folder))
    return importlib.import_module("duckdp_old")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="checkout (a git archive) whose duckdp is `old`")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--key-type", choices=list(KEY_TYPES), default="bigint")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--algos", nargs="+", default=["mad", "mad2r", "adaptive_sips"])
    ap.add_argument("--heavy", type=int, default=0, help="add one user (−1) holding this many distinct keys "
                    "(1..N, as ab_lazy_noise.py), BIGINT keys only")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="duckdp_ab_") as folder:
        packages = {"old": import_old(args.old, Path(folder)), "new": duckdp}
        con, floor = synthetic_with_floor(args.rows, args.key_type, args.threads)
        if args.heavy:
            if args.key_type != "bigint":
                raise SystemExit("--heavy needs --key-type bigint")
            con.execute("INSERT INTO synth BY NAME SELECT -1 AS user_id, range AS item FROM range(1, $n + 1)",
                        {"n": args.heavy})

        def release(name: str, algo: str, seed: int | None = None) -> Any:
            return packages[name].select(con, "synth", algo=algo, rho=0.1, delta=1e-5, max_contributions=DELTA0,
                                         item_col="item", seed=seed)

        for algo in args.algos:
            outs = []
            for name in ("old", "new"):
                outs.append(release(name, algo, seed=5).to_arrow())
                release(name, algo)                                   # unseeded: the timed path; warm-up
            if not outs[0].equals(outs[1]):
                raise SystemExit(f"{algo}: old and new seeded releases differ")

        res, loads = paired(args.repeat, floor, args.algos, ("old", "new"), release)
    heavy = f" + one user with {args.heavy:,} keys" if args.heavy else ""
    report(res, loads, f"{args.rows:,} rows{heavy}, {args.key_type}, threads {args.threads}, {args.repeat} repeats, "
           f"DuckDB {duckdb.__version__}", args.algos)


if __name__ == "__main__":
    main()
