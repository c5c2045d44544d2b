"""Private GROUP BY against the peers at equal (ε, δ) (issue #20): duckdp.aggregate vs PipelineDP, OpenDP, Tumult.

Datasets
  movielens  ../shared/data/movielens_100k_ratings.parquet, key = item, user = user_id, value = rating ∈ [1, 5];
             metrics: users (distinct raters per movie) and mean rating.
  purchases  synthetic, generated here (seeded numpy, --rows, default 10M): users with a Pareto(1.5)-skewed
             number of purchases (≈ 10 rows per user on average), keys = products (rows/100 of them) drawn
             with a Zipf(1.1) popularity, values = lognormal(3, 1) amounts clipped to [0, 500] (cents);
             metrics: users, sum and mean of the amount.
Same contribution bounds for every tool: Δ0 = --max-contributions keys per user (default 10), 1 row per
user and key, values clipped to [1, 5] / [0, 500]. Same budget: (ε, δ) = (--epsilon, --delta), default (1, 1e-5).

How each tool is configured (its best documented setting for an (ε, δ) budget, as far as this script knows)
  duckdp      duckdp.aggregate(keys=K, epsilon=ε, delta=δ, max_contributions=Δ0, max_rows_per_key=1) for
              K ∈ {threshold, adaptive_sips, dpsips}, with aggregate's default truncation="global" (one
              secret key order for every user, spec §7 — OpenDP's order too).
              Budget split (docs/specs/private-group-by.md §4):
              δ/2 to the selection, ρ = the largest zCDP with (ε, δ/2) by DP-SIPS Cor. 9; selection gets
              0.4·ρ (keys="threshold": 0.6·ρ, and the users metric *is* the thresholded count, no second charge),
              the rest split evenly over the metrics. The value column is declared not-null
              (`not_null=[value]`, unless --nullable; both datasets have no NULL, and OpenDP needs
              non-null values too — its query fills NULLs before summing), so shared measures
              (spec §3.1) read one row count for the
              users metric (m = 1) and the mean's denominator: the mean's whole share goes to its centred
              sum (spec §4 "Budget": the count already has the users metric's part, at least the mean's).
              Draws: count + centred sum on MovieLens (0.3·ρ each), count + sum + centred sum on purchases
              (0.2·ρ each). keys="threshold" (one truncation, spec §4.2): users and the mean's count read
              the threshold's own draw, so the mean's whole share goes to its centred sum: one draw on
              MovieLens (0.4·ρ), sum + centred sum on purchases (0.2·ρ each).
              Exact discrete Gaussian noise. Seeded (`seed=`), so runs are reproducible.
  pipelinedp  DPEngine(NaiveBudgetAccountant(ε, δ), LocalBackend()).aggregate with metrics PRIVACY_ID_COUNT,
              MEAN (+ SUM on purchases), noise_kind=GAUSSIAN, max_partitions_contributed=Δ0,
              max_contributions_per_partition=1, min/max_value = the bounds, post_aggregation_thresholding=True
              (partition selection by Gaussian thresholding of the noisy PRIVACY_ID_COUNT, the documented way
              to spend no separate selection budget). The naive accountant splits ε and δ evenly over the
              mechanisms it creates: the thresholded privacy-id count, MEAN's count and normalised sum (SUM
              is derived from MEAN's). PLDBudgetAccountant is not used: in 0.3.1 it refuses
              post_aggregation_thresholding, and with a separate selection it took 157 s of accounting on
              MovieLens (2 shared cores) for 9 keys.
  opendp      Context.compositor(privacy_unit=unit_of(contributions=1, identifier=user), privacy_loss=
              loss_of(rho=ρ, delta=δ_t)) with (ρ, δ_t) from OpenDP's own (ε, δ) → approximate-zCDP conversion
              (context._translate_measure_distance, alpha = 0.5: δ/2 to the threshold, δ/2 to the zCDP
              conversion — the same split duckdp uses), i.e. Gaussian noise (ℓ2, √Δ0) rather than the
              Laplace noise (ℓ1, Δ0) that loss_of(epsilon, delta) gives. Query: truncate_per_group(1),
              truncate_num_groups(Δ0), group_by(key).agg(dp.len(), dp.sum(value)) — one query, ρ split
              evenly between len and sum by OpenDP; its threshold on len selects the keys (δ_t). The mean is
              sum/len (post-processing, clamped to the bounds). Values are integers: MovieLens ratings
              centred (rating − 3 ∈ [−2, 2]), purchase amounts in cents [0, 50000] (integer sums avoid
              OpenDP's float-sum sensitivity inflation). Keys are replaced by a fixed 64-bit hash before
              the query and mapped back after: truncate_num_groups(keep="sample") fails on polars 1.36
              ("multiple fields with name"), and keep="first" on the hash is the same global hash order
              that "sample" uses: hash seed 1000 + seed, a fresh order per seed as duckdp's salt and OpenDP's
              own "sample" give (--opendp-order fixed: seed 7 in every run, the runs before stop 32). Note
              OpenDP 0.16's keep="first" filters `rank("dense") < Δ0` with ranks from 1, so it keeps Δ0 − 1
              keys per user (benchmarks/mean_gap_opendp.py checks it) while its noise is for Δ0.
              Margins: max_length = max_groups = the row count (loose public bounds).
  tumult      Session.from_dataframe(ApproxDPBudget(ε, δ), AddRowsWithID(user)) on Spark local[2]:
              get_groups(key) (Tumult's private key selection, gets δ) then one groupby(KeySet of those keys)
              query per metric (count, average, + sum), all under MaxGroupsPerID(Δ0) and
              MaxRowsPerGroupPerID(1); ε split evenly over the queries; Tumult's default (Laplace) noise.

Measured per tool and run (each run in its own subprocess): keys released; median relative error
|noisy − true|/|true| of each metric against the exact unbounded statistic, on the keys that ALL tools
release in that seed (over the tools releasing at least one key; "own" = on the tool's own keys) and on
the keys each peer shares with duckdp (adaptive_sips); wall time of the release inside the worker (reading
the input included, interpreter/import/JVM start excluded; "proc" adds them); "cpu s" = user + system CPU
seconds of the worker (all its threads, imports included — the fairer speed measure on a shared, overloaded
machine); peak memory = ru_maxrss of the worker. Both from os.wait4 on the worker: its own process, plus a
Spark JVM only if the worker reaped it. Medians over --seeds seeds (--seeds-for: fewer for slow tools).

    nice -n 10 /work/venvs/peers/bin/python benchmarks/bench_aggregate.py                  # everything
    nice -n 10 /work/venvs/peers/bin/python benchmarks/bench_aggregate.py --datasets movielens --seeds 1
    pip install -e '.[bench]'          # PipelineDP, OpenDP (+ polars)
    pip install -e '.[bench-tumult]'   # Tumult, in its own venv (pins pyspark 3.5, pandas < 2; needs Java)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MOVIELENS = ROOT.parent / "shared" / "data" / "movielens_100k_ratings.parquet"
DUCKDP_KEYS = ("threshold", "adaptive_sips", "dpsips")
TOOLS = tuple(f"duckdp:{k}" for k in DUCKDP_KEYS) + ("pipelinedp", "opendp", "tumult")
REFERENCE = "duckdp:adaptive_sips"
PEER_MODULE = {"pipelinedp": "pipeline_dp", "opendp": "opendp", "tumult": "tmlt.analytics"}


# ----------------------------------------------------------------------------------------------- datasets

def dataset_spec(name: str, path: str, max_contributions: int, nullable: bool = False) -> dict:
    """Columns, bounds and metrics of a dataset (the same for every tool); `nullable`: duckdp declares no column."""
    if name == "movielens":
        return {"name": name, "path": path, "user": "user_id", "key": "item", "value": "rating",
                "lower": 1.0, "upper": 5.0, "metrics": ["users", "mean"], "d0": max_contributions,
                "nullable": nullable}
    return {"name": name, "path": path, "user": "user_id", "key": "product", "value": "amount",
            "lower": 0.0, "upper": 500.0, "metrics": ["users", "sum", "mean"], "d0": max_contributions,
            "nullable": nullable}


def make_purchases(rows: int, path: Path, seed: int = 20) -> None:
    """Synthetic purchases: skewed users, Zipf products, skewed amounts (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(seed)
    n_users, n_products = max(rows // 10, 10), max(rows // 100, 10)
    w = rng.pareto(1.5, n_users) + 1.0
    users = rng.choice(n_users, size=rows, p=w / w.sum())
    zipf = 1.0 / np.arange(1, n_products + 1) ** 1.1
    products = rng.permutation(n_products)[rng.choice(n_products, size=rows, p=zipf / zipf.sum())]
    amount = np.round(np.clip(rng.lognormal(3.0, 1.0, rows), 0.0, 500.0), 2)
    pq.write_table(pa.table({"user_id": users.astype(np.int64), "product": products.astype(np.int64),
                             "amount": amount}), path)


def truth(spec: dict) -> dict[str, dict[str, float]]:
    """Exact (unbounded) users, rows, sum and mean per key, keys as strings."""
    rows = duckdb.sql(
        f"SELECT CAST({spec['key']} AS VARCHAR), COUNT(DISTINCT {spec['user']}), COUNT(*), SUM({spec['value']}), "
        f"AVG({spec['value']}) FROM read_parquet('{_quote(spec['path'])}') GROUP BY 1").fetchall()
    return {k: {"users": float(u), "count": float(n), "sum": float(s), "mean": float(m)} for k, u, n, s, m in rows}


def _quote(path: str) -> str:
    return path.replace("'", "''")


# ----------------------------------------------------------------------------------------------- workers
# Each returns {key (str): {metric: value}} for the released keys; the caller times it.

def run_duckdp(spec: dict, keys: str, eps: float, delta: float, seed: int) -> dict:
    sys.path.insert(0, str(ROOT))
    import duckdp
    lo, hi, v = spec["lower"], spec["upper"], spec["value"]
    metrics: dict = {"users": "users"}
    if "sum" in spec["metrics"]:
        metrics["sum"] = ("sum", v, lo, hi)
    metrics["mean"] = ("mean", v, lo, hi)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW src AS SELECT * FROM read_parquet('{_quote(spec['path'])}')")
    agg = duckdp.aggregate(con, "src", by=spec["key"], user_col=spec["user"], metrics=metrics, keys=keys,
                           epsilon=eps, delta=delta, max_contributions=spec["d0"], max_rows_per_key=1, seed=seed,
                           not_null=None if spec.get("nullable") else [v], selection_share=spec.get("share"))
    t = agg.to_arrow().to_pydict()
    names = [m for m in metrics]
    return {str(k): {m: float(t[m][i]) for m in names} for i, k in enumerate(t[spec["key"]])}


def run_pipelinedp(spec: dict, eps: float, delta: float, seed: int) -> dict:
    import pipeline_dp
    import pyarrow.parquet as pq
    t = pq.read_table(spec["path"], columns=[spec["user"], spec["key"], spec["value"]])
    rows = list(zip(*(t.column(c).to_pylist() for c in (spec["user"], spec["key"], spec["value"])), strict=True))
    del t
    metrics = [pipeline_dp.Metrics.PRIVACY_ID_COUNT, pipeline_dp.Metrics.MEAN]
    if "sum" in spec["metrics"]:
        metrics.append(pipeline_dp.Metrics.SUM)
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=metrics, noise_kind=pipeline_dp.NoiseKind.GAUSSIAN, max_partitions_contributed=spec["d0"],
        max_contributions_per_partition=1, min_value=spec["lower"], max_value=spec["upper"],
        post_aggregation_thresholding=True,
        partition_selection_strategy=pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: r[2])
    result = engine.aggregate(rows, params, ex)
    acc.compute_budgets()
    out = {}
    for key, m in result:
        rec = {"users": float(m.privacy_id_count), "mean": float(m.mean)}
        if "sum" in spec["metrics"]:
            rec["sum"] = float(m.sum)
        out[str(key)] = rec
    return out


def run_opendp(spec: dict, eps: float, delta: float, seed: int) -> dict:
    import opendp.prelude as dp
    import polars as pl
    from opendp.context import _translate_measure_distance
    dp.enable_features("contrib")
    lo, hi = spec["lower"], spec["upper"]
    if spec["name"] == "movielens":      # integer ratings, centred: bounds (−2, 2)
        shift, scale = (lo + hi) / 2, 1.0
    else:                                # amounts in cents: bounds (0, 50000)
        shift, scale = 0.0, 100.0
    ilo, ihi = round((lo - shift) * scale), round((hi - shift) * scale)
    rho, delta_t = _translate_measure_distance((eps, delta), dp.approximate(dp.max_divergence()),
                                               dp.approximate(dp.zero_concentrated_divergence()), alpha=0.5)
    src = pl.scan_parquet(spec["path"])
    n = src.select(pl.len()).collect().item()
    hseed = 1000 + seed if spec.get("opendp_order") == "seeded" else 7     # the truncation order: see --opendp-order
    lf = src.select(pl.col(spec["user"]), pl.col(spec["key"]).hash(hseed).alias("_k"),
                    ((pl.col(spec["value"]) - shift) * scale).round(0).cast(pl.Int64).alias("_v"))
    ctx = dp.Context.compositor(
        data=lf, privacy_unit=dp.unit_of(contributions=1, identifier=pl.col(spec["user"])),
        privacy_loss=dp.loss_of(rho=rho, delta=delta_t), split_evenly_over=1,
        margins=[dp.polars.Margin(max_length=n), dp.polars.Margin(by=[pl.col("_k")], max_length=n, max_groups=n)])
    query = (ctx.query().truncate_per_group(1, by=[pl.col("_k")])
             .truncate_num_groups(spec["d0"], by=[pl.col("_k")], keep="first")
             .group_by("_k").agg(dp.len(), pl.col("_v").fill_null(0).dp.sum((ilo, ihi))))
    rel = query.release().collect()
    names = src.select(pl.col(spec["key"]).cast(pl.String).alias("key"),
                       pl.col(spec["key"]).hash(hseed).alias("_k")).unique().collect()
    rel = rel.join(names, on="_k", how="left")
    out = {}
    for key, length, total in zip(rel["key"], rel["len"], rel["_v"], strict=True):
        s = float(total) / scale
        rec = {"users": float(length),
               "mean": min(max(shift + s / length, lo), hi) if length > 0 else (lo + hi) / 2}
        if "sum" in spec["metrics"]:
            rec["sum"] = s + shift * float(length)
        out[str(key)] = rec
    return out


def run_tumult(spec: dict, eps: float, delta: float, seed: int) -> dict:
    from pyspark.sql import SparkSession
    from tmlt.analytics import (
        AddRowsWithID,
        ApproxDPBudget,
        KeySet,
        MaxGroupsPerID,
        MaxRowsPerGroupPerID,
        QueryBuilder,
        Session,
    )
    os.environ["PYSPARK_PYTHON"] = sys.executable     # Spark's Python workers must see tmlt too
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "4g")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="bench_aggregate_spark_"))  # not in the cwd
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    key, v = spec["key"], spec["value"]
    df = spark.read.parquet(spec["path"]).select(spec["user"], key, v)
    df = df.withColumn(key, df[key].cast("string")).withColumn(v, df[v].cast("double"))
    k = 2 + ("sum" in spec["metrics"]) + 1      # get_groups, count, average (+ sum)
    sess = Session.from_dataframe(privacy_budget=ApproxDPBudget(eps, delta), source_id="src", dataframe=df,
                                  protected_change=AddRowsWithID(id_column=spec["user"]))

    def bounded() -> QueryBuilder:
        return (QueryBuilder("src").enforce(MaxGroupsPerID(key, spec["d0"]))
                .enforce(MaxRowsPerGroupPerID(key, 1)))

    groups = sess.evaluate(bounded().get_groups([key]), ApproxDPBudget(eps / k, delta))
    keyset = KeySet.from_dataframe(groups)
    res = {"users": sess.evaluate(bounded().groupby(keyset).count(name="x"), ApproxDPBudget(eps / k, 0))}
    res["mean"] = sess.evaluate(bounded().groupby(keyset).average(v, spec["lower"], spec["upper"], name="x"),
                                ApproxDPBudget(eps / k, 0))
    if "sum" in spec["metrics"]:
        res["sum"] = sess.evaluate(bounded().groupby(keyset).sum(v, spec["lower"], spec["upper"], name="x"),
                                   ApproxDPBudget(eps / k, 0))
    out: dict = {}
    for metric, frame in res.items():
        for row in frame.collect():
            out.setdefault(str(row[key]), {})[metric] = float(row["x"])
    spark.stop()
    return out


def worker(args: argparse.Namespace) -> None:
    spec = json.loads(args.spec)
    tool = args.worker
    t0 = time.perf_counter()
    if tool.startswith("duckdp:"):
        out = run_duckdp(spec, tool.split(":", 1)[1], args.epsilon, args.delta, args.seed)
    else:
        out = {"pipelinedp": run_pipelinedp, "opendp": run_opendp, "tumult": run_tumult}[tool](
            spec, args.epsilon, args.delta, args.seed)
    wall = time.perf_counter() - t0
    Path(args.out).write_text(json.dumps({"wall": wall, "released": out}))


# ----------------------------------------------------------------------------------------------- driver

def run_one(tool: str, spec: dict, seed: int, eps: float, delta: float, tmp: Path, timeout: float) -> dict:
    """Run one tool in a subprocess; its wall time, ru_maxrss (os.wait4) and released keys, or an error."""
    out = tmp / f"out_{os.getpid()}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", tool, "--spec", json.dumps(spec),
           "--seed", str(seed), "--epsilon", repr(eps), "--delta", repr(delta), "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    log = tmp / "worker.log"
    with log.open("w") as sink:      # a file, not a pipe: Spark's logging would fill a pipe and block
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=sink)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            return {"error": f"timeout after {timeout:.0f} s"}
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = log.read_text(errors="replace")
    if proc.returncode != 0 or not out.exists():
        last = [line for line in err.strip().splitlines() if line.strip()][-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {last[0][:160]}"}
    res = json.loads(out.read_text())
    res["proc"] = time.perf_counter() - t0
    res["rss_mb"] = usage.ru_maxrss / 1024
    res["cpu"] = usage.ru_utime + usage.ru_stime
    return res


def rel_err(released: dict, true: dict, keys: set, metric: str) -> float | None:
    errs = [abs(released[k][metric] - true[k][metric]) / abs(true[k][metric]) for k in keys
            if k in true and k in released and true[k][metric] != 0 and metric in released[k]]
    return statistics.median(errs) if errs else None


def med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def bench_dataset(spec: dict, label: str, tools: list[str], args: argparse.Namespace, tmp: Path) -> None:
    true = truth(spec)
    metrics = spec["metrics"]
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    notes: dict[str, str] = {}
    seeds_for = {k: int(v) for k, v in (x.split("=") for x in args.seeds_for.split(",") if x)}
    for seed in range(1, args.seeds + 1):
        for tool in tools:
            if tool in notes or seed > seeds_for.get(tool, args.seeds):
                continue
            res = run_one(tool, spec, seed, args.epsilon, args.delta, tmp, args.timeout)
            if "error" in res:
                notes[tool] = res["error"]
                print(f"  [{label}] {tool} seed {seed}: {res['error']}", file=sys.stderr, flush=True)
                continue
            res["seed"] = seed
            runs[tool].append(res)
            print(f"  [{label}] {tool} seed {seed}: {len(res['released'])} keys, {res['wall']:.1f} s, "
                  f"{res['cpu']:.1f} cpu s, {res['rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    ok = [t for t in tools if runs[t] and t not in notes]
    if args.dump:                 # the truth and every run's released keys, for benchmarks/pair_aggregate.py
        Path(args.dump).mkdir(parents=True, exist_ok=True)
        name = label.replace(" ", "_").replace(",", "")
        (Path(args.dump) / f"{name}_eps{args.epsilon:g}.json").write_text(json.dumps({"truth": true, "runs": runs}))
    # "all": per seed, the keys every tool that ran that seed releases (tools releasing no key left out)
    common: dict[int, set] = {}
    for seed in range(1, args.seeds + 1):
        sets = [set(r["released"]) for t in ok for r in runs[t] if r["seed"] == seed and r["released"]]
        common[seed] = set.intersection(*sets) if sets else set()
    head = "| tool | keys | keys (all) | " + " | ".join(f"{m} err (all)" for m in metrics) + " | "
    head += " | ".join(f"{m} err (own)" for m in metrics) + " | wall s | proc s | cpu s | peak MB |"
    print(f"\n### {label}: {len(true)} keys in the data, ε = {args.epsilon:g}, δ = {args.delta:g}, "
          f"Δ0 = {spec['d0']}, {args.seeds} seed(s) ({args.seeds_for or 'all tools'}), medians\n")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for tool in tools:
        if tool in notes:
            print(f"| {tool} | {notes[tool]} |" + " |" * (head.count("|") - 3))
            continue
        rs = runs[tool]
        errs = [fmt(med([rel_err(r["released"], true, common[r["seed"]], m) for r in rs])) for m in metrics]
        errs += [fmt(med([rel_err(r["released"], true, set(r["released"]), m) for r in rs])) for m in metrics]
        print(f"| {tool} | {fmt(med([len(r['released']) for r in rs]), '.0f')} | "
              f"{fmt(med([len(common[r['seed']]) for r in rs]), '.0f')} | " + " | ".join(errs) +
              f" | {fmt(med([r['wall'] for r in rs]), '.1f')} | {fmt(med([r['proc'] for r in rs]), '.1f')} | "
              f"{fmt(med([r['cpu'] for r in rs]), '.1f')} | {fmt(med([r['rss_mb'] for r in rs]), '.0f')} |")
    if REFERENCE not in ok:
        return
    print(f"\nPairwise with {REFERENCE} (keys both release; median relative error, duckdp / peer):\n")
    head = "| peer | shared keys | " + " | ".join(f"{m} duckdp / peer" for m in metrics) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for tool in ok:
        if tool == REFERENCE:
            continue
        by_seed = {r["seed"]: r for r in runs[REFERENCE]}
        pairs = [(by_seed[r["seed"]], r) for r in runs[tool] if r["seed"] in by_seed]
        shared = [set(a["released"]) & set(b["released"]) for a, b in pairs]
        cells = []
        for m in metrics:
            a = med([rel_err(p[0]["released"], true, s, m) for p, s in zip(pairs, shared, strict=True)])
            b = med([rel_err(p[1]["released"], true, s, m) for p, s in zip(pairs, shared, strict=True)])
            cells.append(f"{fmt(a)} / {fmt(b)}")
        print(f"| {tool} | {fmt(med([len(s) for s in shared]), '.0f')} | " + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="movielens,purchases")
    p.add_argument("--rows", default="10000000", help="purchases sizes, comma-separated (e.g. 1000000,10000000)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--max-contributions", type=int, default=10, help="Δ0: keys per user, for every tool")
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--max-rows", default="pipelinedp=1000000,tumult=10000000",
                   help="largest purchases size each slow peer runs at (tool=rows,...)")
    p.add_argument("--seeds-for", default="tumult=1",
                   help="fewer seeds for slow tools (tool=n,...); their medians are over n runs")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--dump", help="also write each dataset's runs and truth as JSON into this folder "
                                  "(benchmarks/pair_aggregate.py compares them)")
    p.add_argument("--selection-share", type=float,
                   help="duckdp's selection_share (default: its own, 0.4; 0.6 with keys=threshold)")
    p.add_argument("--nullable", action="store_true",
                   help="duckdp does not declare the value column not-null (its plan before not_null existed)")
    p.add_argument("--opendp-order", choices=("fixed", "seeded"), default="seeded",
                   help="OpenDP's Δ0 order: hash(1000 + seed), a fresh order per seed like duckdp's salted one "
                        "(default), or the keys' polars hash(7), the same in every run (the runs before stop 32)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    spec_extra = {"share": args.selection_share, "opendp_order": args.opendp_order}
    tools = [t for t in args.tools.split(",") if t]
    for t in tools:
        if t not in TOOLS and not t.startswith("duckdp:"):      # duckdp:<any select() algorithm> also runs
            p.error(f"unknown tool {t!r}; known: {', '.join(TOOLS)}")
    caps = {k: int(v) for k, v in (x.split("=") for x in args.max_rows.split(",") if x)}
    available = []
    for t in tools:
        mod = PEER_MODULE.get(t)
        if mod is not None and importlib.util.find_spec(mod.split(".")[0]) is None:
            extra = "bench-tumult" if t == "tumult" else "bench"
            print(f"SKIPPED {t}: `{mod}` is not installed (pip install -e '.[{extra}]')")
        else:
            available.append(t)
    with tempfile.TemporaryDirectory(prefix="bench_aggregate_") as d:
        tmp = Path(d)
        for name in args.datasets.split(","):
            if name == "movielens":
                bench_dataset(dataset_spec(name, str(MOVIELENS), args.max_contributions, args.nullable) | spec_extra,
                              "MovieLens 100k", available, args, tmp)
                continue
            for rows in (int(r) for r in args.rows.split(",")):
                path = tmp / f"purchases_{rows}.parquet"
                t0 = time.perf_counter()
                make_purchases(rows, path)
                print(f"  generated purchases {rows:,} rows in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                run_tools = []
                for t in available:
                    if rows > caps.get(t, rows):
                        print(f"\nNOT RUN {t} at {rows:,} rows (above --max-rows {t}={caps[t]:,})")
                    else:
                        run_tools.append(t)
                bench_dataset(dataset_spec(name, str(path), args.max_contributions, args.nullable) | spec_extra,
                              f"purchases {rows:,} rows", run_tools, args, tmp)
                path.unlink()


if __name__ == "__main__":
    main()
