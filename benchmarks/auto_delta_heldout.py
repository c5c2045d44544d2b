"""Held-out data for choosing the auto-Δ0 rule and share (issue 21 item 3), never the 16-cell seeds 1–5.

`measure`: for one dataset × mechanism × budget, over seeds 101–130, mean released keys at a fine grid
of fixed Δ0 (the utility curve) and, at the curve's best Δ0, `auto` with its choice forced to that Δ0 for
several shares (what the share alone costs); one JSON file per cell. `analyse`: for each candidate rule
and share, the expected ratio to the best fixed Δ0 ∈ {10, 30, 100, 300, 1000} = (share's cost) ×
E[curve(Δ0)] / best, with Δ0 drawn 2,000 times from the rule on the dataset's exact histogram plus
fresh N(0, σ_a²) noise (curve interpolated in log Δ0).

    nice -n 10 python benchmarks/auto_delta_heldout.py measure movielens_latest_small dpsips eps=1 out.json
    python benchmarks/auto_delta_heldout.py analyse out_dir/*.json
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import duckdp  # noqa: E402
from duckdp.privacy import auto_contributions as A  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BUDGETS = {"rho=0.1": {"rho": 0.1, "delta": 1e-5}, "eps=1": {"epsilon": 1.0, "delta": 1e-5}}
GRID = [10, 20, 30, 50, 75, 100, 150, 200, 300, 400, 500, 700, 1000, 1500, 2500, 4096]
SHARES = [0.0025, 0.005, 0.01]
SEEDS = range(101, 131)


def main(name: str, algo: str, label: str, out: str) -> None:
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("CREATE TABLE t AS SELECT * FROM read_parquet($p)", {"p": str(DATA / f"{name}.parquet")})
    budget = BUDGETS[label]
    curve = {d: statistics.mean(len(duckdp.select(con, "t", algo=algo, max_contributions=d, seed=s, **budget))
                                for s in SEEDS) for d in GRID}
    at = max(curve, key=lambda d: curve[d])
    real_choose = A.choose
    A.choose = lambda counts, sigma, z: at       # forced choice: the share's own cost
    try:
        shares = {s: statistics.mean(len(duckdp.select(con, "t", algo=algo, max_contributions="auto", auto_share=s,
                                                       seed=x, **budget)) for x in SEEDS) for s in SHARES}
    finally:
        A.choose = real_choose
    Path(out).write_text(json.dumps({"dataset": name, "algo": algo, "budget": label, "curve": curve,
                                     "forced_at": at, "shares": shares}))
    print(name, algo, label, curve, at, shares, flush=True)


# --- analyse: candidate rules on the exact histograms (users per bucket, EDGES) ---------------------------
HIST = {"movielens_latest_small": [0, 0, 284, 223, 91, 12, 0], "movielens_100k": [0, 0, 464, 391, 88, 0, 0],
        "reddit_1pct_unigrams": [347, 1513, 1398, 224, 4, 0, 0], "imdb_unigrams": [1, 25, 3547, 40613, 5812, 1, 0]}
SIGMA = {"rho=0.1": lambda s: 1 / math.sqrt(2 * 0.1 * s),          # zCDP, B&S Prop. 1.6
         "eps=1": {0.0025: 77.67, 0.005: 54.91, 0.01: 38.82}.__getitem__}   # the GDP split's σ_a (dpsips, adaptive)


def _run_around_mode(noisy, sigma, cut):
    keep = np.zeros(noisy.size, bool)
    mode = int(np.argmax(noisy))
    keep[mode] = True
    for step in (1, -1):
        b = mode + step
        while 0 <= b < noisy.size and noisy[b] >= cut * sigma:
            keep[b] = True
            b += step
    return np.where(keep, np.maximum(noisy, 0), 0)


def _quantile(kept, q):
    edges = np.array(A.EDGES, float)
    total = kept.sum()
    if not total > 0:
        return A.FALLBACK
    cum = np.cumsum(kept)
    b = min(int(np.searchsorted(cum, q * total)), len(kept) - 1)
    if b >= len(edges) - 1:
        return A.CAP
    frac = (q * total - (cum[b] - kept[b])) / kept[b]
    return min(max(math.ceil(edges[b] * 4 ** min(max(frac, 0), 1)), 1), A.CAP)


RULES = {   # R0 = the rule before (hard cut at σ on the run around the mode); R8 = soft threshold (chosen)
    "R0 p90 run>=1σ": lambda n, s: _quantile(_run_around_mode(n, s, 1.0), 0.9),
    "R1 p90 run>=2σ": lambda n, s: _quantile(_run_around_mode(n, s, 2.0), 0.9),
    "R5 p95 run>=1σ": lambda n, s: _quantile(_run_around_mode(n, s, 1.0), 0.95),
    "R6 p95 run>=2σ": lambda n, s: _quantile(_run_around_mode(n, s, 2.0), 0.95),
    "R7 p90 run>=0.5σ": lambda n, s: _quantile(_run_around_mode(n, s, 0.5), 0.9),
    "R8 p90 soft σ": lambda n, s: _quantile(np.maximum(n - s, 0), 0.9),
    "R9 p90 soft σ/2": lambda n, s: _quantile(np.maximum(n - s / 2, 0), 0.9),
}


def analyse(files: list[str]) -> None:
    table: dict = {}
    for f in files:
        d = json.loads(Path(f).read_text())
        curve = {int(k): v for k, v in d["curve"].items()}
        xs, ys = np.log(sorted(curve)), np.array([curve[k] for k in sorted(curve)])
        best = max(curve[k] for k in (10, 30, 100, 300, 1000))
        for share, kept in d["shares"].items():
            sigma = SIGMA[d["budget"]](float(share))
            for name, rule in RULES.items():
                rng = np.random.default_rng(0)
                h = np.array(HIST[d["dataset"]], float)
                draws = [rule(h + sigma * rng.standard_normal(h.size), sigma) for _ in range(2000)]
                ratio = kept / curve[d["forced_at"]] * float(np.interp(np.log(draws), xs, ys).mean()) / best
                table.setdefault((float(share), name), []).append((f"{d['dataset']} {d['algo']} {d['budget']}", ratio))
    for (share, name), cells in sorted(table.items()):
        r = [x for _, x in cells]
        print(f"share {share:<7}{name:<18} min {min(r):.3f} mean {statistics.mean(r):.3f}  "
              + " ".join(f"{x:.3f}" for x in r))
    print("cells:", [c for c, _ in next(iter(table.values()))])


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "measure":
        main(*sys.argv[2:6])
    elif len(sys.argv) > 2 and sys.argv[1] == "analyse":
        analyse(sys.argv[2:])
    else:
        sys.exit(__doc__)
