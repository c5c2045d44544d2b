"""Is duckdp's mean-rating error on MovieLens really worse than OpenDP's, and why? (issue #20's error goal, stop 32)

Three measurements on `../shared/data/movielens_100k_ratings.parquet` (per movie: users, mean rating in [1, 5],
Δ0 = 10, one row per user and movie, the same configuration as benchmarks/bench_aggregate.py):

  ratios DIR        Many-seed spread of the ratio pair_aggregate.py reports: from `bench_aggregate.py --dump DIR`
                    files, per duckdp tool and peer, per seed: the keys both release, each one's median relative
                    error of the metric on them, and the per-seed ratio. Prints the ratio of the medians over
                    seeds (pair_aggregate's number) with a 95 % bootstrap interval (seeds resampled, 2,000 draws,
                    fixed generator) and the per-seed ratios' median and quartiles.
  decompose DIR     Truncation bias vs noise on the same shared keys: each duckdp tool rerun in-process with the
                    same seed and its metrics' noise removed (a monkeypatch hands `finish` the exact truncated
                    measures instead of the noisy ones; the selection, its noise and every salt are untouched,
                    so the same keys come out), and OpenDP's noiseless truncated mean computed here from the
                    bench's query: keys replaced by polars `hash(7)`, `truncate_num_groups(Δ0, keep="first")`
                    = per user the groups of smallest hash, by `rank("dense") < Δ0` as OpenDP's Python writes it
                    (dense ranks start at 1, so that keeps Δ0 − 1 keys: checked here against the released `len`
                    at a huge budget with `--check-opendp`), then sum/len.
  bias              Truncation bias alone on fixed key sets (top 20/50/100/200 movies by raters), with the
                    truncation over every key that keys="threshold" and OpenDP's thresholded query use: duckdp
                    `keys=<every key>` with the metrics' noise removed vs OpenDP's kept pairs (no noise).
  fixed             A key set neither tool selected: the top-N movies by true raters (public here by
                    assumption), released by both tools for those keys only: duckdp `keys=<list>` and OpenDP
                    `.filter(key in list)` before the same truncation and `.with_keys(list)` after the
                    aggregation (no threshold). Both restrict first, then truncate, so the selection effect is
                    gone and the error is each tool's truncation + noise on the same keys. `--opendp-order
                    seeded` hashes OpenDP's keys with the seed (a fresh order per seed, as duckdp's salt) instead
                    of the bench's fixed hash(7).

    P=/work/venvs/peers/bin/python; export PYTHONPATH=$PWD
    $P benchmarks/bench_aggregate.py --datasets movielens --epsilon 4 --seeds 30 \\
        --tools duckdp:threshold,duckdp:adaptive_sips,duckdp:dpsips,opendp,pipelinedp --dump /tmp/meangap/base
    $P benchmarks/mean_gap_opendp.py ratios /tmp/meangap/base
    $P benchmarks/mean_gap_opendp.py decompose /tmp/meangap/base --epsilon 4
    $P benchmarks/mean_gap_opendp.py fixed --epsilon 4 --seeds 30 --top 50
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_aggregate as ba  # noqa: E402

DUCKDP_TOOLS = ("duckdp:threshold", "duckdp:dpsips", "duckdp:adaptive_sips")


def rel_errs(released: dict, true: dict, keys, metric: str) -> list[float]:
    return [abs(released[k][metric] - true[k][metric]) / abs(true[k][metric]) for k in keys
            if k in released and true.get(k, {}).get(metric)]


def med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(a: list[float], b: list[float], draws: int = 2000) -> dict:
    """Ratio of medians over seeds, its bootstrap 95 % interval, per-seed ratios' quartiles."""
    a_, b_ = np.asarray(a), np.asarray(b)
    rng = np.random.default_rng(20)
    idx = rng.integers(0, len(a_), size=(draws, len(a_)))
    boots = np.median(a_[idx], axis=1) / np.median(b_[idx], axis=1)
    per = a_ / b_
    return {"ratio": float(np.median(a_) / np.median(b_)), "lo": float(np.quantile(boots, 0.025)),
            "hi": float(np.quantile(boots, 0.975)), "q1": float(np.quantile(per, 0.25)),
            "q2": float(np.median(per)), "q3": float(np.quantile(per, 0.75)),
            "wins": int((per < 1.0).sum()), "n": len(per)}


def load(dump: Path, peers: str | None = None) -> tuple[dict, dict]:
    """Truth and runs of a dump's MovieLens file; `peers`: another dump whose peer runs replace this one's
    (duckdp's runs kept: e.g. OpenDP rerun with --opendp-order seeded, paired per seed)."""
    f = next(dump.glob("MovieLens*_eps*.json")) if dump.is_dir() else dump
    d = json.loads(f.read_text())
    if peers:
        other = json.loads((Path(peers) / f.name).read_text())["runs"]
        d["runs"] |= {t: rs for t, rs in other.items() if not t.startswith("duckdp:") and rs}
    return d["truth"], d["runs"]


def per_seed(true: dict, mine: list, peer: list, metric: str, keysets: dict | None = None):
    """Per seed both ran: (seed, shared keys, duckdp error, peer error)."""
    by_seed = {r["seed"]: r for r in peer}
    out = []
    for r in mine:
        p = by_seed.get(r["seed"])
        if p is None:
            continue
        shared = keysets[r["seed"]] if keysets else set(r["released"]) & set(p["released"])
        a, b = med(rel_errs(r["released"], true, shared, metric)), med(rel_errs(p["released"], true, shared, metric))
        if a is not None and b:
            out.append((r["seed"], shared, a, b))
    return out


def cmd_ratios(args: argparse.Namespace) -> None:
    for dump in args.dumps:
        true, runs = load(Path(dump), args.peers)
        print(f"\n{dump}" + (f", peers from {args.peers}" if args.peers else "") + "\n")
        print("| duckdp tool | peer | metric | seeds | shared keys (median) | duckdp err | peer err | "
              "ratio of medians [95 % bootstrap] | per-seed ratio median [q1, q3] | seeds duckdp better |")
        print("|---|---|---|---:|---:|---:|---:|---|---|---:|")
        for t in DUCKDP_TOOLS:
            for peer in ("opendp", "pipelinedp"):
                if not runs.get(t) or not runs.get(peer):
                    continue
                for m in ("mean", "users"):
                    rows = per_seed(true, runs[t], runs[peer], m)
                    if len(rows) < 2:
                        print(f"| {t} | {peer} | {m} | {len(rows)} | – | – | – | – | – | – |")
                        continue
                    s = spread([r[2] for r in rows], [r[3] for r in rows])
                    a, b = statistics.median(r[2] for r in rows), statistics.median(r[3] for r in rows)
                    print(f"| {t} | {peer} | {m} | {s['n']} | {statistics.median(len(r[1]) for r in rows):.0f} | "
                          f"{a:.4f} | {b:.4f} | "
                          f"**{s['ratio']:.2f}** [{s['lo']:.2f}, {s['hi']:.2f}] | {s['q2']:.2f} [{s['q1']:.2f}, "
                          f"{s['q3']:.2f}] | {s['wins']}/{s['n']} |")


# --------------------------------------------------------------------------------------------- noiseless runs

def duckdp_noiseless(spec: dict, keys, eps: float, delta: float, seed: int) -> dict:
    """duckdp.aggregate with every metric's noise removed: `finish` gets the exact truncated measures
    (`_dp_m<i>`, and the threshold's true kept-user count `_dp_c` for its draw) of the same run."""
    import duckdp.group_by as gb
    import duckdp.mechanisms.aggregate.duckdb as own
    from duckdp.privacy.aggregate import THRESHOLD_TAG
    captured: dict = {}
    orig = {"thresholded": own.thresholded, "measures": own.measures, "finish": gb.finish}

    def keep(name):
        def f(*a, **k):
            captured["true"] = orig[name](*a, **k)
            return captured["true"]
        return f

    def finish(plan, noisy):
        true = captured["true"]
        clean = {(m.metric, m.part): true.column("_dp_c" if m.tag == THRESHOLD_TAG else f"_dp_m{i}")
                 .to_numpy(zero_copy_only=False).astype(np.int64) for i, m in enumerate(plan.measures)}
        return orig["finish"](plan, clean)

    own.thresholded, own.measures, gb.finish = keep("thresholded"), keep("measures"), finish
    try:
        return ba.run_duckdp(spec, keys, eps, delta, seed)
    finally:
        own.thresholded, own.measures, gb.finish = orig["thresholded"], orig["measures"], orig["finish"]


def opendp_truncated(spec: dict, hash_seed: int = 7, keys: list | None = None, keep: int | None = None) -> dict:
    """OpenDP's kept pairs without noise (the bench's query): per user the `keep` groups of smallest
    hash(hash_seed) (default Δ0 − 1: `rank("dense") < Δ0`, ranks from 1), one row per (user, key); per key
    len, sum and mean. `keys`: filter to them first (the `fixed` mode's query)."""
    import polars as pl
    u, k, v = spec["user"], spec["key"], spec["value"]
    df = pl.read_parquet(spec["path"], columns=[u, k, v])
    if keys is not None:
        df = df.filter(pl.col(k).is_in(keys))
    df = df.with_columns(pl.col(k).hash(hash_seed).alias("_k"))
    df = df.filter(pl.int_range(pl.len()).over(u, "_k") < 1)            # truncate_per_group(1, keep="first")
    cut = spec["d0"] if keep is None else keep + 1
    df = df.filter(pl.struct("_k").rank("dense").over(u) < cut)
    g = df.group_by(k).agg(pl.len().alias("n"), pl.col(v).sum().alias("s"), pl.col(v).mean().alias("m"))
    return {str(a): {"users": float(n), "sum": float(x), "mean": float(m)}
            for a, n, x, m in zip(g[k], g["n"], g["s"], g["m"], strict=True)}


def cmd_decompose(args: argparse.Namespace) -> None:
    true, runs = load(Path(args.dump), args.peers)
    spec = ba.dataset_spec("movielens", str(ba.MOVIELENS), args.max_contributions)
    seeded = args.opendp_order == "seeded"                 # OpenDP's order per seed, as bench_aggregate's option
    otrunc = {s: opendp_truncated(spec, 1000 + s if seeded else 7) for s in {r["seed"] for r in runs["opendp"]}}
    if args.check_opendp:
        big = ba.run_opendp(spec, 200.0, args.delta, 1)
        seven = opendp_truncated(spec)
        diffs = [abs(big[k]["users"] - seven[k]["users"]) for k in big if k in seven]
        full = opendp_truncated(spec, keep=spec["d0"])
        print(f"OpenDP at ε = 200: {len(big)} keys, max |len − kept users (Δ0 − 1 kept)| = {max(diffs):.1f}; "
              f"with Δ0 kept: {max(abs(big[k]['users'] - full[k]['users']) for k in big if k in full):.1f}")
    print(f"\nε = {args.epsilon:g}: median relative error on the keys each duckdp tool and OpenDP both release "
          "(per seed median over the keys, then median over seeds); 'no noise' = the same release with the metrics' "
          "noise removed, the threshold's count included (truncation bias alone)\n")
    print("| duckdp tool | seeds | shared | metric | duckdp | duckdp no noise | OpenDP | OpenDP no noise | "
          "ratio | ratio, no noise [95 %] |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---|")
    for t in DUCKDP_TOOLS:
        if not runs.get(t) or not runs.get("opendp"):
            continue
        clean = []
        for r in runs[t][: args.seeds]:
            rel = duckdp_noiseless(spec, t.split(":", 1)[1], args.epsilon, args.delta, r["seed"])
            if set(rel) != set(r["released"]):
                print(f"  {t} seed {r['seed']}: noiseless run released other keys", file=sys.stderr)
            clean.append({"seed": r["seed"], "released": rel})
        for m in ("mean", "users"):
            noisy = per_seed(true, runs[t][: args.seeds], runs["opendp"], m)
            keysets = {s: sh for s, sh, _, _ in noisy}
            quiet = per_seed(true, clean, [{"seed": s, "released": otrunc[s]} for s in keysets], m, keysets)
            sq = spread([r[2] for r in quiet], [r[3] for r in quiet])
            a, b = statistics.median(r[2] for r in noisy), statistics.median(r[3] for r in noisy)
            a0, b0 = statistics.median(r[2] for r in quiet), statistics.median(r[3] for r in quiet)
            print(f"| {t} | {len(noisy)} | {statistics.median(len(r[1]) for r in noisy):.0f} | {m} | {a:.4f} | "
                  f"{a0:.4f} | {b:.4f} | {b0:.4f} | {a / b:.2f} | {a0 / b0:.2f} [{sq['lo']:.2f}, {sq['hi']:.2f}] |")


# ------------------------------------------------------------------------------------------------ fixed keys

def opendp_public(spec: dict, keys: list, eps: float, delta: float, hash_seed: int) -> dict:
    """The bench's OpenDP query restricted to public keys: filter first, no threshold (`with_keys`)."""
    import opendp.prelude as dp
    import polars as pl
    from opendp.context import _translate_measure_distance
    dp.enable_features("contrib")
    rho, _ = _translate_measure_distance((eps, delta), dp.approximate(dp.max_divergence()),
                                         dp.approximate(dp.zero_concentrated_divergence()), alpha=0.5)
    u, k, v = spec["user"], spec["key"], spec["value"]
    # the filter on the public key list runs before OpenDP sees the data (a stable, data-independent
    # transformation; OpenDP's plan does not accept a literal `is_in` list in polars 1.36)
    src = pl.read_parquet(spec["path"], columns=[u, k, v]).filter(pl.col(k).is_in(keys)).lazy()
    n = src.select(pl.len()).collect().item()
    lf = src.select(pl.col(u), pl.col(k).hash(hash_seed).alias("_k"),
                    (pl.col(v) - 3.0).round(0).cast(pl.Int64).alias("_v"))
    ctx = dp.Context.compositor(
        data=lf, privacy_unit=dp.unit_of(contributions=1, identifier=pl.col(u)),
        privacy_loss=dp.loss_of(rho=rho), split_evenly_over=1,
        margins=[dp.polars.Margin(max_length=n), dp.polars.Margin(by=[pl.col("_k")], max_length=n, max_groups=n)])
    hashed = pl.DataFrame({k: keys}).select(pl.col(k).hash(hash_seed).alias("_k"),
                                            pl.col(k).cast(pl.String).alias("key"))
    query = (ctx.query().truncate_per_group(1, by=[pl.col("_k")])
             .truncate_num_groups(spec["d0"], by=[pl.col("_k")], keep="first")
             .group_by("_k").agg(dp.len(), pl.col("_v").fill_null(0).dp.sum((-2, 2)))
             .with_keys(hashed.select("_k").lazy()))
    rel = query.release().collect().join(hashed, on="_k", how="left")
    out = {}
    for key, length, total in zip(rel["key"], rel["len"], rel["_v"], strict=True):
        length, total = float(length or 0), float(total or 0)
        out[str(key)] = {"users": length, "mean": min(max(3.0 + total / length, 1.0), 5.0) if length > 0 else 3.0}
    return out


def cmd_fixed(args: argparse.Namespace) -> None:
    spec = ba.dataset_spec("movielens", str(ba.MOVIELENS), args.max_contributions)
    true = ba.truth(spec)
    top = sorted(true, key=lambda k: (-true[k]["users"], int(k)))[: args.top]
    keys = list(top)                                  # the item column is VARCHAR
    kset = set(top)
    rows: dict[str, list] = {"duckdp": [], "duckdp no noise": [], "opendp": [], "opendp no noise": []}
    for seed in range(1, args.seeds + 1):
        hseed = 7 if args.opendp_order == "fixed" else 1000 + seed
        d = ba.run_duckdp(spec, keys, args.epsilon, args.delta, seed)
        d0 = duckdp_noiseless(spec, keys, args.epsilon, args.delta, seed)
        o = opendp_public(spec, keys, args.epsilon, args.delta, hseed)
        o0 = opendp_truncated(spec, hseed, keys)
        for name, rel in (("duckdp", d), ("duckdp no noise", d0), ("opendp", o), ("opendp no noise", o0)):
            rows[name].append({m: med(rel_errs(rel, true, kset, m)) for m in ("mean", "users")})
        print(f"  seed {seed}: mean err duckdp {rows['duckdp'][-1]['mean']:.4f} "
              f"opendp {rows['opendp'][-1]['mean']:.4f}", file=sys.stderr, flush=True)
    print(f"\nε = {args.epsilon:g}, top {args.top} movies by raters as public keys, {args.seeds} seeds, OpenDP order "
          f"{args.opendp_order}: median over seeds of the median relative error over the {args.top} keys\n")
    print("| metric | duckdp | duckdp no noise | OpenDP | OpenDP no noise | ratio [95 % bootstrap] | "
          "per-seed ratio [q1, q3] | seeds duckdp better |")
    print("|---|---:|---:|---:|---:|---|---|---:|")
    for m in ("mean", "users"):
        a, b = [r[m] for r in rows["duckdp"]], [r[m] for r in rows["opendp"]]
        s = spread(a, b)
        print(f"| {m} | {statistics.median(a):.4f} | {statistics.median(r[m] for r in rows['duckdp no noise']):.4f} | "
              f"{statistics.median(b):.4f} | {statistics.median(r[m] for r in rows['opendp no noise']):.4f} | "
              f"**{s['ratio']:.2f}** [{s['lo']:.2f}, {s['hi']:.2f}] | {s['q2']:.2f} [{s['q1']:.2f}, {s['q3']:.2f}] | "
              f"{s['wins']}/{s['n']} |")


def cmd_bias(args: argparse.Namespace) -> None:
    """Truncation bias alone, over every key (the truncation keys="threshold" and OpenDP's threshold query run),
    read on a fixed key set: duckdp `keys=<every key>` with no noise (restricting to all keys restricts nothing),
    OpenDP's kept pairs in its order (fixed or per seed); a key with no kept user reads the midpoint 3 in both."""
    spec = ba.dataset_spec("movielens", str(ba.MOVIELENS), args.max_contributions)
    true = ba.truth(spec)
    every = sorted(true, key=lambda k: (-true[k]["users"], int(k)))
    sets = {f"top {n}": set(every[:n]) for n in (20, 50, 100, 200)}
    rows: dict[str, dict[str, list]] = {n: {"duckdp": [], "opendp": []} for n in sets}
    for seed in range(1, args.seeds + 1):
        d0 = duckdp_noiseless(spec, every, args.epsilon, args.delta, seed)
        o0 = opendp_truncated(spec, 7 if args.opendp_order == "fixed" else 1000 + seed)
        o0 = {k: o0.get(k, {"users": 0.0, "mean": 3.0}) for k in every}   # no kept user: the midpoint, as duckdp
        for n, ks in sets.items():
            rows[n]["duckdp"].append(med(rel_errs(d0, true, ks, "mean")))
            rows[n]["opendp"].append(med(rel_errs(o0, true, ks, "mean")))
    print(f"\nMean rating, truncation over every key, no noise, {args.seeds} seeds, OpenDP order {args.opendp_order}: "
          "median over seeds of the median relative error over the key set\n")
    print("| key set (by true raters) | duckdp | OpenDP | ratio [95 % bootstrap] | per-seed ratio [q1, q3] |")
    print("|---|---:|---:|---|---|")
    for n in sets:
        a, b = rows[n]["duckdp"], rows[n]["opendp"]
        sp = spread(a, b)
        print(f"| {n} | {statistics.median(a):.4f} | {statistics.median(b):.4f} | {sp['ratio']:.2f} "
              f"[{sp['lo']:.2f}, {sp['hi']:.2f}] | {sp['q2']:.2f} [{sp['q1']:.2f}, {sp['q3']:.2f}] |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("ratios")
    r.add_argument("dumps", nargs="+")
    r.add_argument("--peers", help="a dump whose peer runs replace the dumps' (paired by seed)")
    for name in ("decompose", "fixed", "bias"):
        q = sub.add_parser(name)
        if name == "decompose":
            q.add_argument("dump")
            q.add_argument("--check-opendp", action="store_true")
            q.add_argument("--peers", help="a dump whose peer runs replace the dump's (paired by seed)")
        q.add_argument("--epsilon", type=float, default=4.0)
        q.add_argument("--delta", type=float, default=1e-5)
        q.add_argument("--max-contributions", type=int, default=10)
        q.add_argument("--seeds", type=int, default=30)
        q.add_argument("--opendp-order", choices=("fixed", "seeded"), default="fixed",
                       help="OpenDP's order: hash(7) in every run, or hash(1000 + seed) (bench_aggregate's option)")
        if name == "fixed":
            q.add_argument("--top", type=int, default=50)
    args = p.parse_args()
    {"ratios": cmd_ratios, "decompose": cmd_decompose, "fixed": cmd_fixed, "bias": cmd_bias}[args.cmd](args)


if __name__ == "__main__":
    main()
