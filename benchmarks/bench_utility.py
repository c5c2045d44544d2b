"""Utility of every mechanism on the shared datasets: released keys and captured mass, mean ± sd over seeds.

Grid: every dataset in ../shared/data × every mechanism in duckdp.algorithms() × the budgets
ρ = 0.1 zCDP and ε = 1 (both δ = 1e-5, Δ0 = 100), seeds 0..N−1. Mechanisms that do not take a
budget kind print "n/a"; baselines (`unproven`) run with allow_unproven=True and are marked †.
Captured mass (share of distinct (user, key) entries whose key was released) comes from
duckdp.evaluate — it reads exact counts, so it is a benchmark number, not a private one.
For weighted_gaussian the exact expectation E[#released] = Σ_i Φ((w_i − T)/σ) given each seed's
truncation is printed too (the number the statistical tests check against).

A second table puts DP-SIPS and MAD2R at ε = 1 (rounds composed exactly as Gaussians) next to the
old numbers from basic composition (OLD_BASIC_COMPOSITION, from RESULTS.md); a third puts the
published numbers of ../shared/data/README.md (DP-SIPS Table 2 on IMDb; the Gopi et al. reference
code on reddit_1pct) next to ours at exactly their settings.
The prototype numbers of docs/specs/adaptive-sips.md sit with the published ones; adaptive_sips rows
follow dpsips in the main table (registry order).

    python benchmarks/bench_utility.py                                  # everything, 5 seeds
    python benchmarks/bench_utility.py --datasets reddit_1pct_unigrams --seeds 2 --algos weighted_gaussian dpsips
    python benchmarks/bench_utility.py --algos dpsips mad2r --budgets epsilon=1,delta=1e-5 --no-published
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.mechanisms.base import Params  # noqa: E402
from duckdp.mechanisms.basic import basic_weights  # noqa: E402
from duckdp.privacy.budget import make_budget  # noqa: E402
from duckdp.privacy.calibration import gaussian_release_probability  # noqa: E402
from duckdp.rng import Randomness  # noqa: E402
from duckdp.run import RunContext  # noqa: E402
from duckdp.source import resolve  # noqa: E402
from duckdp.stages.duckdb import DuckDBStages  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DELTA0 = 100
BUDGETS = ["rho=0.1,delta=1e-5", "epsilon=1,delta=1e-5"]
E_MINUS_10 = f"{math.exp(-10):.17g}"
# (dataset, budget, algo, params, published released count, source) from ../shared/data/README.md.
PUBLISHED = [
    ("imdb_unigrams", "rho=0.1,delta=1e-5", "weighted_gaussian", {}, 3728,
     "DP-SIPS Table 2 (README: exact E = 3,974.9)"),
    ("imdb_unigrams", "rho=0.1,delta=1e-5", "dpsips", {}, 7759, "DP-SIPS Table 2 (I = 3, r = 1/3)"),
    ("imdb_unigrams", "rho=0.1,delta=1e-5", "policy_gaussian", {}, 5845, "DP-SIPS Table 2 (DPSU)"),
    ("imdb_unigrams", "rho=0.1,delta=1e-5", "adaptive_sips", {}, 8470, "docs/specs/adaptive-sips.md numpy prototype"),
    ("imdb_unigrams", "epsilon=1,delta=1e-5", "adaptive_sips", {}, 5186, "docs/specs/adaptive-sips.md numpy prototype"),
    ("imdb_unigrams", "epsilon=1.7,delta=8.1142e-5", "gw", {}, 3133, "DP-SIPS Table 2 (GW)"),
    ("reddit_1pct_unigrams", "rho=0.1,delta=1e-5", "weighted_gaussian", {}, 176, "README (≈)"),
    ("reddit_1pct_unigrams", "rho=0.1,delta=1e-5", "adaptive_sips", {}, 241,
     "docs/specs/adaptive-sips.md numpy prototype"),
    ("reddit_1pct_unigrams", f"epsilon=3,delta={E_MINUS_10}", "weighted_gaussian", {}, 288, "Gopi et al. code"),
    ("reddit_1pct_unigrams", f"epsilon=3,delta={E_MINUS_10}", "policy_gaussian", {"alpha": 5.0}, 341,
     "Gopi et al. code"),
    ("reddit_1pct_unigrams", f"epsilon=3,delta={E_MINUS_10}", "policy_gaussian_l1", {"alpha": 5.0}, 371,
     "Gopi et al. code"),
    ("reddit_1pct_unigrams", f"epsilon=3,delta={E_MINUS_10}", "policy_laplace", {"alpha": 3.0}, 161,
     "Gopi et al. code"),
    ("reddit_1pct_unigrams", f"epsilon=3,delta={E_MINUS_10}", "weighted_laplace", {}, 104, "Gopi et al. code"),
    ("reddit_1pct_unigrams", f"epsilon=3,delta={E_MINUS_10}", "count_gaussian", {}, 168, "Gopi et al. code"),
    ("reddit_1pct_unigrams", f"epsilon=3,delta={E_MINUS_10}", "gw", {"alpha": 3.0}, 231, "Gopi et al. code"),
]


# Released keys (mean ± sd, 5 seeds) at ε = 1, δ = 1e-5 BEFORE exact composition, when the rounds split
# (ε, δ) by basic composition: benchmarks/RESULTS.md "Utility" (2026-11-22), kept as a reference column.
OLD_BASIC_COMPOSITION = {
    ("imdb_unigrams", "dpsips"): "3,442.2 ± 7.5", ("imdb_unigrams", "mad2r"): "3,575.0 ± 31.4",
    ("movielens_100k", "dpsips"): "28.4 ± 1.8", ("movielens_100k", "mad2r"): "53.8 ± 4.8",
    ("movielens_latest_small", "dpsips"): "1.6 ± 1.5", ("movielens_latest_small", "mad2r"): "4.4 ± 1.3",
    ("reddit_1pct_unigrams", "dpsips"): "79.8 ± 2.6", ("reddit_1pct_unigrams", "mad2r"): "100.6 ± 4.2",
}
OLD_SPEC = "epsilon=1,delta=1e-5"


def parse_budget(spec: str) -> dict:
    return {k: float(v) for k, v in (p.split("=") for p in spec.split(","))}


def short(spec: str) -> str:
    symbol = {"rho": "ρ", "epsilon": "ε"}
    return ", ".join(f"{symbol.get(k, 'δ')}={v:.3g}" for k, v in parse_budget(spec).items())


def expected_weighted_gaussian(con, table: str, budget_kw: dict, seed: int) -> float:
    """Σ P(w + N(0, σ²) ≥ T) for the truncation a seeded run uses (noise integrated out)."""
    plan = duckdp.mechanisms.get("weighted_gaussian").plan(make_budget(**budget_kw), Params(DELTA0))[0]
    ctx = RunContext(con, resolve(con, table, "user_id", "item", "bench"), Randomness(seed))
    try:
        weights = basic_weights(DuckDBStages(ctx), DELTA0, 0.5)
        w = con.sql(f"SELECT _dp_w FROM ({weights.sql})", params=weights.params).fetchnumpy()["_dp_w"]
    finally:
        ctx.close()
    return float(gaussian_release_probability(w, plan.scale, plan.threshold).sum())


def run(con, info: dict, spec: str, seeds: int, params: dict | None = None) -> dict | None:
    """Released counts, captured masses and seconds per run over `seeds` seeded runs (None: budget not taken)."""
    kw = parse_budget(spec)
    if (("rho" in kw and "rho/delta" not in info["budgets"])
            or ("epsilon" in kw and "epsilon/delta" not in info["budgets"])):
        return None
    extra = (params or {}) | ({"allow_unproven": True} if info.get("unproven") else {})
    counts, masses, seconds = [], [], 0.0
    for seed in range(seeds):
        start = time.perf_counter()
        rel = duckdp.select(con, "data", algo=info["name"], max_contributions=DELTA0, seed=seed, **kw, **extra)
        seconds += time.perf_counter() - start
        counts.append(len(rel))
        masses.append(duckdp.evaluate(con, "data", rel).captured_mass)
    out = {"counts": counts, "masses": masses, "seconds": seconds / seeds}
    if info["name"] == "weighted_gaussian" and not params:
        out["expected"] = statistics.mean(expected_weighted_gaussian(con, "data", kw, s) for s in range(seeds))
    return out


def mean_sd(xs: list[float], fmt: str = ",.1f") -> str:
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):{fmt}} ± {sd:{fmt}}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--datasets", nargs="+", default=None, help="parquet stems (default: every file in --data-dir)")
    ap.add_argument("--algos", nargs="+", default=None, help="default: all of duckdp.algorithms()")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budgets", nargs="+", default=BUDGETS)
    ap.add_argument("--no-published", action="store_true", help="skip the published-numbers table")
    args = ap.parse_args(argv)
    if not args.data_dir.is_dir():
        sys.exit(f"no data folder at {args.data_dir}; pass --data-dir")
    datasets = args.datasets or sorted(p.stem for p in args.data_dir.glob("*.parquet"))
    known = {a["name"]: a for a in duckdp.algorithms()}
    algos = [known[a] for a in (args.algos or known) if a in known]
    print(f"# duckdp utility — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("command: python benchmarks/bench_utility.py " + " ".join(sys.argv[1:] if argv is None else argv) + "\n")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; DuckDB {duckdb.__version__}, duckdp "
          f"{duckdp.__version__}; Δ0 = {DELTA0}; seeds 0..{args.seeds - 1}; "
          "† = baseline run with allow_unproven=True\n")
    print("| dataset | budget | algo | released (mean ± sd) | captured mass | exact E[released] | s/run |")
    print("|---|---|---|---:|---:|---:|---:|")
    published_rows, composition_rows = [], []
    for name in datasets:
        con = duckdb.connect()
        con.execute("CREATE TABLE data AS SELECT user_id, item FROM read_parquet($p)",
                    {"p": str(args.data_dir / f"{name}.parquet")})
        grid = {}
        for spec in args.budgets:
            for info in algos:
                res = run(con, info, spec, args.seeds)
                grid[(spec, info["name"])] = res
                label = info["name"] + (" †" if info.get("unproven") else "")
                if res is None:
                    print(f"| {name} | {short(spec)} | {label} | n/a (budget kind not taken) | | | |")
                    continue
                exp = f"{res['expected']:,.1f}" if "expected" in res else ""
                print(f"| {name} | {short(spec)} | {label} | {mean_sd(res['counts'])} | "
                      f"{mean_sd(res['masses'], '.2%')} | {exp} | {res['seconds']:.2f} |", flush=True)
        for (ds, algo), before in OLD_BASIC_COMPOSITION.items():
            res = grid.get((OLD_SPEC, algo)) if ds == name else None
            if res is not None:
                composition_rows.append((ds, algo, res, before))
        if not args.no_published:
            for ds, spec, algo, params, value, source in PUBLISHED:
                if ds != name or algo not in {a["name"] for a in algos}:   # only the mechanisms asked for
                    continue
                res = grid.get((spec, algo)) if not params else None
                res = res or run(con, known[algo], spec, args.seeds, params)
                published_rows.append((ds, spec, algo, params, value, source, res))
        con.close()
    if composition_rows:
        print("\n## (ε, δ) = (1, 1e-5): exact Gaussian composition of the rounds vs the old basic composition\n")
        print("| dataset | algo | exact composition (mean ± sd) | basic composition, before (RESULTS.md) |")
        print("|---|---|---:|---:|")
        for ds, algo, res, before in composition_rows:
            print(f"| {ds} | {algo} | {mean_sd(res['counts'])} | {before} |")
    if published_rows:
        print("\n## Published (../shared/data/README.md) and prototype (specs/) numbers vs duckdp at the same "
              "settings, Δ0 = 100\n")
        print("| dataset | budget | algo | published | duckdp (mean ± sd) | duckdp / published | exact E[released] "
              "| source |")
        print("|---|---|---|---:|---:|---:|---:|---|")
        for ds, spec, algo, params, value, source, res in published_rows:
            label = algo + "".join(f" {k}={v:g}" for k, v in params.items())
            mean = statistics.mean(res["counts"])
            exp = f"{res['expected']:,.1f}" if "expected" in res else ""
            print(f"| {ds} | {short(spec)} | {label} | {value:,} | {mean_sd(res['counts'])} | {mean / value:.3f} | "
                  f"{exp} | {source} |")


if __name__ == "__main__":
    main()
