"""Paired CPU seconds per statement of two checkouts' adaptive_sips releases in one process (issue #21: where a
plain-data difference comes from). `old` is another checkout's package, imported as `duckdp_old`
(ab_checkouts.py), `new` is this checkout; releases alternate old/new (old first on even repeats) on the
synthetic table of bench_speed.py, BIGINT keys, 2 threads, with `--heavy N` one more user (−1) with N keys.
Per release, each RunContext call's CPU (time.process_time: user + system, all threads, ns clock) is summed
by template (stage_store by its table); "other" is the rest (noise stages, Python, statements on the
connection itself). Reported: medians per arm and the median paired difference new − old.

    git -C . archive <old commit> | tar -x -C /tmp/old
    python benchmarks/ab_calls.py --old /tmp/old --rows 10000000 --repeat 4
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import duckdp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_checkouts import import_old  # noqa: E402
from ab_timing import synthetic_with_floor  # noqa: E402
from bench_speed import DELTA0  # noqa: E402

log: list[tuple[str, float]] = []
STAGE = re.compile(r'"?_duckdp_[0-9a-f]+_([a-z_]*[a-z])\d*"?')


def wrap(package: ModuleType, method: str) -> None:
    """Time every `method` call of `package`'s RunContext into `log`, labelled by template (and stored table)."""
    fn: Callable = getattr(package.run.RunContext, method)

    def timed(self: object, *args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(self, *args, **kwargs)
        finally:
            label = f"{method} " + (STAGE.sub(r"\1", args[0])[:50] if method == "scalar" else args[0])
            if method != "scalar" and len(args) > 1 and "target" in args[1]:
                label += ":" + STAGE.sub(r"\1", args[1]["target"])
            log.append((label, time.process_time() - start))
    setattr(package.run.RunContext, method, timed)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="checkout (a git archive) whose duckdp is `old`")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--heavy", type=int, default=0, help="add one user (−1) holding this many distinct keys")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="duckdp_ab_") as folder:
        packages = {"old": import_old(args.old, Path(folder)), "new": duckdp}
        for package in packages.values():
            for method in ("execute", "arrow", "fetch", "scalar"):
                wrap(package, method)
        con, _floor = synthetic_with_floor(args.rows, "bigint", 2)
        if args.heavy:
            con.execute("INSERT INTO synth BY NAME SELECT -1 AS user_id, range AS item FROM range(1, $n + 1)",
                        {"n": args.heavy})

        def release(name: str) -> None:
            packages[name].select(con, "synth", algo="adaptive_sips", rho=0.1, delta=1e-5,
                                  max_contributions=DELTA0, item_col="item")
        for name in packages:                                    # warm-up
            release(name)
        calls: dict[str, dict[str, list[float]]] = {name: collections.defaultdict(list) for name in packages}
        totals: dict[str, list[float]] = {name: [] for name in packages}
        for r in range(args.repeat):
            for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                log.clear()
                start = time.process_time()
                release(name)
                total = time.process_time() - start
                totals[name].append(total)
                spent: dict[str, float] = collections.defaultdict(float)
                for label, cpu in log:
                    spent[label] += cpu
                spent["other (noise stages, Python, direct statements)"] = total - sum(cpu for _, cpu in log)
                for label in set(spent) | set(calls[name]):
                    calls[name][label].append(spent[label])
    diffs = [n - o for n, o in zip(totals["new"], totals["old"], strict=True)]
    print(f"# {args.rows:,} rows" + (f" + one user with {args.heavy:,} keys" if args.heavy else "")
          + f", {args.repeat} repeats, load average {os.getloadavg()[0]:.1f}")
    print(f"total CPU s: old {statistics.median(totals['old']):.3f}, new {statistics.median(totals['new']):.3f}, "
          f"median paired new − old {statistics.median(diffs):+.3f} ({', '.join(f'{d:+.3f}' for d in diffs)})")
    print("| call | old CPU s | new CPU s | median paired new − old |\n|---|---:|---:|---:|")
    for label in sorted(set(calls["old"]) | set(calls["new"])):
        old, new = ([*calls[n].get(label, []), *[0.0] * args.repeat][:args.repeat] for n in ("old", "new"))
        print(f"| {label} | {statistics.median(old):.3f} | {statistics.median(new):.3f} | "
              f"{statistics.median(b - a for a, b in zip(old, new, strict=True)):+.3f} |")


if __name__ == "__main__":
    main()
