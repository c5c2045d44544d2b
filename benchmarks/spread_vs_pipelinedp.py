"""Per-movie variance of ratings on MovieLens 100k: duckdp.aggregate's `variance` metric against PipelineDP's
VARIANCE, at equal (ε, δ), over several runs: movies released, and on the movies both release the median
relative error of each tool's variance (and mean, and users) against the raw per-movie statistic.

Both tools run {users, mean, variance} with Gaussian noise, Δ0 keys per user, one rating per user and movie,
ratings clipped to [1, 5]; PipelineDP with post-aggregation thresholding (its private partition selection on
the privacy-id count) and its naive accountant (ε, δ split evenly over its mechanisms), duckdp with
keys="threshold" (the same kind of selection) and adaptive_sips, rating declared not-null. PipelineDP draws
fresh noise every run (it takes no seed); duckdp runs seeds 1…N.

    pip install pipeline-dp==0.3.1           # the peer (not a duckdp dependency)
    python benchmarks/spread_vs_pipelinedp.py --runs 10
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402


def truth(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[float, float, float]]:
    return {str(k): (float(n), float(m), float(v)) for k, n, m, v in con.sql(
        "SELECT item, count(DISTINCT user_id), avg(rating), var_pop(rating) FROM r GROUP BY item").fetchall()}


def run_duckdp(con: duckdb.DuckDBPyConnection, keys: str, eps: float, delta: float, d0: int,
               seed: int) -> dict[str, tuple[float, float, float]]:
    agg = duckdp.aggregate(con, "r", by="item", user_col="user_id", keys=keys, epsilon=eps, delta=delta,
                           metrics={"users": "users", "mean": ("mean", "rating", 1, 5),
                                    "var": ("variance", "rating", 1, 5)},
                           max_contributions=d0, not_null="rating", seed=seed)
    return {str(x["item"]): (float(x["users"]), x["mean"], x["var"]) for x in agg.to_arrow().to_pylist()}


def run_pipelinedp(rows: list, eps: float, delta: float, d0: int) -> dict[str, tuple[float, float, float]]:
    import pipeline_dp
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT, pipeline_dp.Metrics.MEAN, pipeline_dp.Metrics.VARIANCE],
        noise_kind=pipeline_dp.NoiseKind.GAUSSIAN, max_partitions_contributed=d0, max_contributions_per_partition=1,
        min_value=1.0, max_value=5.0, post_aggregation_thresholding=True,
        partition_selection_strategy=pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: r[2])
    result = engine.aggregate(rows, params, ex)
    acc.compute_budgets()
    return {str(k): (float(m.privacy_id_count), float(m.mean), float(m.variance)) for k, m in result}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data/movielens_100k_ratings.parquet")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--max-contributions", type=int, default=10)
    args = ap.parse_args()
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT user_id, item, rating FROM read_parquet(?)", [args.data])
    true = truth(con)
    rows = con.sql("SELECT user_id, item, rating::DOUBLE FROM r").fetchall()
    tools = {"duckdp threshold": lambda s: run_duckdp(con, "threshold", args.epsilon, args.delta,
                                                      args.max_contributions, s),
             "duckdp adaptive_sips": lambda s: run_duckdp(con, "adaptive_sips", args.epsilon, args.delta,
                                                          args.max_contributions, s),
             "PipelineDP": lambda s: run_pipelinedp(rows, args.epsilon, args.delta, args.max_contributions)}
    runs = {name: [fn(seed) for seed in range(1, args.runs + 1)] for name, fn in tools.items()}
    print(f"MovieLens 100k, ε = {args.epsilon:g}, δ = {args.delta:g}, Δ0 = {args.max_contributions}, "
          f"{args.runs} runs; relative errors against the raw per-movie statistic, medians over shared movies, "
          "then the median over runs\n")
    print("| tool | movies released | vs PipelineDP: shared movies | users err | mean err | variance err | "
          "PipelineDP users / mean / variance err |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in ("duckdp threshold", "duckdp adaptive_sips"):
        cells: dict[str, list[float]] = {k: [] for k in ("n", "shared", "u", "m", "v", "pu", "pm", "pv")}
        for ours, peer in zip(runs[name], runs["PipelineDP"], strict=True):
            shared = sorted(set(ours) & set(peer))
            cells["n"].append(len(ours))
            cells["shared"].append(len(shared))
            for i, (mine, theirs) in enumerate((("u", "pu"), ("m", "pm"), ("v", "pv"))):
                ks = [k for k in shared if true[k][i] > 0]            # (a movie rated alike by all: variance 0)
                cells[mine].append(statistics.median(abs(ours[k][i] - true[k][i]) / true[k][i] for k in ks))
                cells[theirs].append(statistics.median(abs(peer[k][i] - true[k][i]) / true[k][i] for k in ks))
        med = {k: statistics.median(v) for k, v in cells.items()}
        print(f"| {name} | {med['n']:.0f} | {med['shared']:.0f} | {med['u']:.3f} | {med['m']:.3f} | {med['v']:.3f} | "
              f"{med['pu']:.3f} / {med['pm']:.3f} / {med['pv']:.3f} |")
    print(f"\nPipelineDP releases {statistics.median(len(r) for r in runs['PipelineDP']):.0f} movies (median).")


if __name__ == "__main__":
    main()
