"""Error ratios duckdp / peer on shared keys, from `bench_aggregate.py --dump DIR` files (issue #20 goal:
metric error on the keys shared with the best peer within 10 % of that peer's).

For every duckdp tool T, peer P and metric: per seed, the keys both release; the median relative error
|noisy − true| / |true| of each on those keys (against the exact unbounded statistic); medians over seeds;
the ratio T / P. Each peer shares different keys with T (PipelineDP's are head keys, OpenDP's reach into
the tail), so errors are compared only within a pair, and the goal binds at the largest ratio over peers
(marked *). `--also DIR2`: add the duckdp runs of another dump (e.g. one made with --nullable), paired with
the peers of the first, named "T (DIR2 name)".

    /work/venvs/peers/bin/python benchmarks/pair_aggregate.py DIR [--also DIR2]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def rel_err(released: dict, true: dict, keys: set, metric: str) -> float | None:
    errs = [abs(released[k][metric] - true[k][metric]) / abs(true[k][metric]) for k in keys
            if true.get(k, {}).get(metric) and metric in released[k]]
    return statistics.median(errs) if errs else None


def med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def pair(true: dict, mine: list[dict], peer: list[dict], metric: str) -> tuple[float | None, float | None, float]:
    """(duckdp error, peer error, median shared keys) over the seeds both ran."""
    by_seed = {r["seed"]: r for r in peer}
    a, b, n = [], [], []
    for r in mine:
        if r["seed"] not in by_seed:
            continue
        p = by_seed[r["seed"]]
        shared = set(r["released"]) & set(p["released"])
        n.append(len(shared))
        a.append(rel_err(r["released"], true, shared, metric))
        b.append(rel_err(p["released"], true, shared, metric))
    return med(a), med(b), statistics.median(n) if n else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--also")
    args = ap.parse_args()
    print("| dataset | duckdp tool | metric | peer | shared keys | duckdp err | peer err | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for f in sorted(Path(args.dump).glob("*.json")):
        d = json.loads(f.read_text())
        true, runs = d["truth"], d["runs"]
        mine = {t: rs for t, rs in runs.items() if t.startswith("duckdp:") and rs}
        if args.also and (Path(args.also) / f.name).exists():
            other = json.loads((Path(args.also) / f.name).read_text())["runs"]
            mine |= {f"{t} ({Path(args.also).name})": rs for t, rs in other.items() if t.startswith("duckdp:") and rs}
        peers = {t: rs for t, rs in runs.items() if not t.startswith("duckdp:") and rs}
        metrics = sorted({m for rs in runs.values() for r in rs for v in r["released"].values() for m in v})
        for t, rs in mine.items():
            for m in metrics:
                rows = [(a / b if b else float("inf"), p, a, b, n)
                        for p, prs in peers.items() for a, b, n in [pair(true, rs, prs, m)]
                        if a is not None and b is not None]
                worst = max((r[0] for r in rows), default=None)
                for ratio, p, a, b, n in rows:
                    mark = "*" if ratio == worst and len(rows) > 1 else ""
                    print(f"| {f.stem} | {t} | {m} | {p} | {n:.0f} | {a:.3f} | {b:.3f} | {ratio:.2f}{mark} |")

if __name__ == "__main__":
    main()
