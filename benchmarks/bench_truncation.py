"""Truncation order: truncation="per_user" vs "global" for aggregate() and select() (benchmarks/RESULTS.md
"Truncation order").

per_user: a user over Δ0 keeps the Δ0 keys of smallest keyed hash of (user, key) — a uniform subset, independent
across users; global: the Δ0 keys of smallest keyed hash of the key alone — one secret order of the keys (fresh
salt per truncation, so per round) that every user follows, as OpenDP's truncate_num_groups does with one hash.
Both give every key the same expected kept weight; "global" keeps all-or-nothing of a key's users, so its weight
varies more across keys — more keys over a high threshold, fewer where most keys clear it.

Part 1 (aggregate): ../shared/data/movielens_100k_ratings.parquet, metrics users + mean rating ∈ [1, 5] as in
benchmarks/bench_aggregate.py, (ε, δ) = (--epsilons, 1e-5), Δ0 = 10, 1 row per key, keys ∈ {threshold,
adaptive_sips, dpsips}. Orders: per_user, global, and "global+pu" (global for the selection, per_user for the
metrics' truncation: a bench-only hybrid, to see which truncation moves the metrics' error). Keys released and
median relative error |noisy − true|/true of users and mean on the call's own keys against the exact, unbounded
statistic (mean ± sd over seeds).
Part 2 (select): every ../shared/data/*.parquet of (user_id, item) pairs, released keys for --algos at ρ = 0.1,
δ = 1e-5, Δ0 ∈ {10, 100}.
Part 3 (users): aggregate() with one users metric on the same datasets, (ε, δ) = (--epsilons, 1e-5), Δ0 ∈ --d0:
keys released and useful keys (noisy users within 10 % of the true distinct users).

    nice -n 10 python benchmarks/bench_truncation.py                       # every part
    nice -n 10 python benchmarks/bench_truncation.py --part aggregate --seeds 10
    nice -n 10 python benchmarks/bench_truncation.py --part select --datasets movielens_100k --seeds 3
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.mechanisms.aggregate import duckdb as agg_duckdb  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RATINGS = DATA / "movielens_100k_ratings.parquet"
ORDERS = ("per_user", "global")


def mean_sd(xs: list[float], fmt: str = ",.1f") -> str:
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):{fmt}} ± {sd:{fmt}}"


@contextmanager
def per_user_metrics() -> Iterator[None]:
    """The hybrid "global+pu": the metrics' truncation (aggregate stage 2) runs per user, the selection's globally."""
    bound_keys = agg_duckdb.bound_keys

    def patched(engine, rows, max_contributions):
        engine.truncation = "per_user"
        try:
            return bound_keys(engine, rows, max_contributions)
        finally:
            engine.truncation = "global"

    agg_duckdb.bound_keys = patched
    try:
        yield
    finally:
        agg_duckdb.bound_keys = bound_keys


def aggregate_part(seeds: int, epsilons: list[float], d0: int) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT user_id, item, rating FROM read_parquet($p)", {"p": str(RATINGS)})
    truth = {k: (u, m) for k, u, m in con.sql("SELECT item, count(DISTINCT user_id), avg(rating) FROM r "
                                              "GROUP BY item").fetchall()}
    metrics = {"users": "users", "mean": ("mean", "rating", 1.0, 5.0)}
    print(f"## aggregate: MovieLens 100k, δ = 1e-5, Δ0 = {d0}, 1 row per key, seeds 0..{seeds - 1}\n")
    print("Errors: median relative error against the exact unbounded statistic, per seed, then mean ± sd over "
          "seeds; \"own\" on the call's keys, \"shared\" on the keys per_user also releases in that seed; "
          "useful = released keys whose users AND mean are within 10 % of the truth.\n")
    print("| ε | keys | order | keys released | useful keys | users err (own) | mean err (own) "
          "| users err (shared) | mean err (shared) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")

    def err(out: dict, keys: set, i: int) -> float | None:
        return statistics.median(abs(out[k][i] - truth[k][i]) / truth[k][i] for k in keys) if keys else None

    def cell(xs: list) -> str:
        xs = [x for x in xs if x is not None]
        return mean_sd(xs, ".3f") if xs else "–"

    for eps in epsilons:
        for keys in ("threshold", "adaptive_sips", "dpsips"):
            runs: dict[str, list[dict]] = {o: [] for o in ("per_user", "global", "global+pu")}
            for seed in range(seeds):
                for order in runs:
                    with per_user_metrics() if order == "global+pu" else _nothing():
                        agg = duckdp.aggregate(con, "r", by="item", metrics=metrics, keys=keys, epsilon=eps,
                                               delta=1e-5, max_contributions=d0, max_rows_per_key=1, seed=seed,
                                               truncation=order.split("+")[0])
                    t = agg.to_arrow().to_pydict()
                    runs[order].append({k: (u, m) for k, u, m in zip(t["item"], t["users"], t["mean"], strict=True)})
            for order, outs in runs.items():
                useful = [sum(all(abs(o[k][i] - truth[k][i]) <= 0.1 * truth[k][i] for i in (0, 1)) for k in o)
                          for o in outs]
                shared = [set(o) & set(p) for o, p in zip(outs, runs["per_user"], strict=True)]
                print(f"| {eps:g} | {keys} | {order} | {mean_sd([len(o) for o in outs])} | {mean_sd(useful)} | "
                      f"{cell([err(o, set(o), 0) for o in outs])} | {cell([err(o, set(o), 1) for o in outs])} | "
                      f"{cell([err(o, s, 0) for o, s in zip(outs, shared, strict=True)])} | "
                      f"{cell([err(o, s, 1) for o, s in zip(outs, shared, strict=True)])} |", flush=True)
    con.close()


def pairs_tables(datasets: list[str]) -> Iterator[tuple[str, duckdb.DuckDBPyConnection]]:
    """Each dataset's (user_id, item) pairs as table `data` on a fresh connection, closed after its turn."""
    for name in datasets:
        con = duckdb.connect()
        try:
            con.execute("CREATE TABLE data AS SELECT user_id, item FROM read_parquet($p)",
                        {"p": str(DATA / f"{name}.parquet")})
            yield name, con
        finally:
            con.close()


def users_part(seeds: int, epsilons: list[float], datasets: list[str], d0s: list[int], modes: list[str]) -> None:
    """aggregate() with one users metric on the (user_id, item) datasets: keys released and useful keys."""
    print(f"\n## aggregate, users metric only: δ = 1e-5, seeds 0..{seeds - 1} (mean ± sd; useful = users within "
          "10 % of the true distinct users)\n")
    print("| dataset | ε | Δ0 | keys | per_user keys | global keys | per_user useful | global useful |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for name, con in pairs_tables(datasets):
        truth = dict(con.sql("SELECT item, count(*) FROM data GROUP BY item").fetchall())    # distinct pairs
        for eps in epsilons:
            for d0 in d0s:
                for keys in modes:
                    counts: dict[str, list[int]] = {o: [] for o in ORDERS}
                    useful: dict[str, list[int]] = {o: [] for o in ORDERS}
                    for seed in range(seeds):
                        for order in ORDERS:
                            t = duckdp.aggregate(con, "data", by="item", metrics={"users": "users"}, keys=keys,
                                                 epsilon=eps, delta=1e-5, max_contributions=d0, seed=seed,
                                                 truncation=order).to_arrow().to_pydict()
                            counts[order].append(len(t["item"]))
                            useful[order].append(sum(abs(u - truth[k]) <= 0.1 * truth[k]
                                                     for k, u in zip(t["item"], t["users"], strict=True)))
                    print(f"| {name} | {eps:g} | {d0} | {keys} | {mean_sd(counts['per_user'])} | "
                          f"{mean_sd(counts['global'])} | {mean_sd(useful['per_user'])} | "
                          f"{mean_sd(useful['global'])} |", flush=True)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def select_part(seeds: int, datasets: list[str], algos: list[str], d0s: list[int]) -> None:
    print(f"\n## select: released keys, ρ = 0.1, δ = 1e-5, seeds 0..{seeds - 1} (mean ± sd; s = seconds per run)\n")
    print("| dataset | Δ0 | algo | per_user | global | global / per_user | s (pu / gl) |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, con in pairs_tables(datasets):
        for d0 in d0s:
            for algo in algos:
                res: dict[str, list[int]] = {}
                secs: dict[str, float] = {}
                for order in ORDERS:
                    start = time.perf_counter()
                    res[order] = [len(duckdp.select(con, "data", algo=algo, rho=0.1, delta=1e-5, max_contributions=d0,
                                                    seed=seed, truncation=order)) for seed in range(seeds)]
                    secs[order] = (time.perf_counter() - start) / seeds
                pu, gl = statistics.mean(res["per_user"]), statistics.mean(res["global"])
                ratio = f"{gl / pu:.2f}" if pu else "–"
                print(f"| {name} | {d0} | {algo} | {mean_sd(res['per_user'])} | {mean_sd(res['global'])} | {ratio} | "
                      f"{secs['per_user']:.1f} / {secs['global']:.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["aggregate", "select", "users", "all"], default="all")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--datasets", nargs="+", default=["movielens_100k", "movielens_latest_small",
                                                      "reddit_1pct_unigrams", "imdb_unigrams"])
    ap.add_argument("--algos", nargs="+", default=["weighted_gaussian", "dpsips", "adaptive_sips", "mad2r"])
    ap.add_argument("--d0", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--keys", nargs="+", default=["threshold", "adaptive_sips", "dpsips"], help="users part")
    args = ap.parse_args()
    print(f"# truncation order — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"command: python benchmarks/bench_truncation.py {' '.join(sys.argv[1:])}\n")
    if args.part in ("aggregate", "all"):
        aggregate_part(args.seeds, args.epsilons, 10)
    if args.part in ("select", "all"):
        select_part(args.seeds, args.datasets, args.algos, args.d0)
    if args.part in ("users", "all"):
        users_part(args.seeds, args.epsilons, args.datasets, args.d0, args.keys)


if __name__ == "__main__":
    main()
