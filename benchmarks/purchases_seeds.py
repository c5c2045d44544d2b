"""Issue #20's error goal on the synthetic purchases table with many seeds (stop 32).

`bench_aggregate.py` writes its dump only at the end of all seeds; this driver runs the same workers
(`bench_aggregate.run_one`, same spec, same data generator, seeded) for a range of seeds and appends each run
to `DIR/runs.jsonl` as it finishes, so a long run can be stopped and resumed and chunks can be merged.

  run DIR      --tools T1,T2 --seeds A-B [--rows 1000000 --epsilon 1 --opendp-order seeded|fixed]
               Runs are stored under the tool name, "opendp" gets the suffix ":fixed" when --opendp-order fixed.
  report DIR   Per duckdp tool, metric (users, sum, mean) and peer: per seed the keys both release, each tool's
               median relative error on them, the ratio of the medians over seeds with a 95 % bootstrap interval
               over seeds (benchmarks/mean_gap_opendp.py's `spread`), per-seed ratios' quartiles, and the seeds
               where duckdp is better; "best peer" = the peer with the largest ratio (the goal binds there, as in
               pair_aggregate.py). Keys released per tool: median [q1, q3].

    P=/work/venvs/peers/bin/python; export PYTHONPATH=$PWD
    T=duckdp:threshold,duckdp:adaptive_sips,duckdp:dpsips,opendp
    nice -n 10 $P benchmarks/purchases_seeds.py run /tmp/p30/d --tools $T --seeds 1-30 --opendp-order seeded
    nice -n 10 $P benchmarks/purchases_seeds.py run /tmp/p30/pdp --tools pipelinedp --seeds 1-30   # stopped at N
    nice -n 10 $P benchmarks/purchases_seeds.py run /tmp/p30/ofix --tools opendp --opendp-order fixed --seeds 1-30
    $P benchmarks/purchases_seeds.py report /tmp/p30/d /tmp/p30/pdp [/tmp/p30/ofix]
    nice -n 10 $P benchmarks/purchases_seeds.py decompose /tmp/p30/d --seeds 10

  decompose DIR  Truncation bias vs noise on the keys each duckdp tool and OpenDP (seeded order) share.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_aggregate as ba  # noqa: E402
from mean_gap_opendp import med, opendp_truncated, rel_errs, spread  # noqa: E402


def cmd_run(args: argparse.Namespace) -> None:
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    a, b = (int(x) for x in args.seeds.split("-"))
    with tempfile.TemporaryDirectory(prefix="purchases_seeds_") as t:
        tmp = Path(t)
        path = tmp / f"purchases_{args.rows}.parquet"
        ba.make_purchases(args.rows, path)
        spec = ba.dataset_spec("purchases", str(path), args.max_contributions) | {
            "share": None, "opendp_order": args.opendp_order}
        truth_f = d / "truth.json"
        if not truth_f.exists():
            truth_f.write_text(json.dumps(ba.truth(spec)))
        for seed in range(a, b + 1):
            for tool in args.tools.split(","):
                name = tool + (":fixed" if tool == "opendp" and args.opendp_order == "fixed" else "")
                res = ba.run_one(tool, spec, seed, args.epsilon, args.delta, tmp, args.timeout)
                if "error" in res:
                    print(f"  {name} seed {seed}: {res['error']}", file=sys.stderr, flush=True)
                    continue
                res |= {"seed": seed, "tool": name}
                with (d / "runs.jsonl").open("a") as f:
                    f.write(json.dumps(res) + "\n")
                print(f"  {name} seed {seed}: {len(res['released'])} keys, {res['cpu']:.1f} cpu s, "
                      f"{res['proc']:.1f} s", file=sys.stderr, flush=True)


def cmd_report(args: argparse.Namespace) -> None:
    true = json.loads((Path(args.dirs[0]) / "truth.json").read_text())
    runs: dict[str, dict[int, dict]] = {}
    for d in args.dirs:
        for line in (Path(d) / "runs.jsonl").read_text().splitlines():
            r = json.loads(line)
            runs.setdefault(r["tool"], {})[r["seed"]] = r        # a rerun of a seed replaces the earlier one
    print("Keys released per tool, median [q1, q3] over seeds (seeds)\n")
    print("| tool | seeds | keys released | cpu s (median) |")
    print("|---|---:|---|---:|")
    for t, rs in sorted(runs.items()):
        k = np.array([len(r["released"]) for r in rs.values()])
        print(f"| {t} | {len(k)} | {np.median(k):.0f} [{np.quantile(k, .25):.0f}, {np.quantile(k, .75):.0f}] | "
              f"{statistics.median(r['cpu'] for r in rs.values()):.1f} |")
    mine = [t for t in runs if t.startswith("duckdp:")]
    peers = [t for t in runs if not t.startswith("duckdp:")]
    print("\n| duckdp tool | metric | peer | seeds | shared keys (median) | duckdp err | peer err | "
          "ratio of medians [95 % bootstrap] | per seed [q1, q3] | better |")
    print("|---|---|---|---:|---:|---:|---:|---|---|---:|")
    for t in mine:
        for m in ("users", "sum", "mean"):
            lines = []
            for p in peers:
                rows = []
                for seed, r in sorted(runs[t].items()):
                    q = runs[p].get(seed)
                    if q is None:
                        continue
                    shared = set(r["released"]) & set(q["released"])
                    a_, b_ = (med(rel_errs(x["released"], true, shared, m)) for x in (r, q))
                    if a_ is not None and b_:
                        rows.append((len(shared), a_, b_))
                if len(rows) < 2:
                    lines.append((-1.0, f"| {t} | {m} | {p} | {len(rows)} | – | – | – | – | – | – |"))
                    continue
                s = spread([x[1] for x in rows], [x[2] for x in rows])
                n_shared = statistics.median(x[0] for x in rows)
                lines.append((s["ratio"], f"| {t} | {m} | {p} | {s['n']} | {n_shared:.0f} | "
                              f"{statistics.median(x[1] for x in rows):.4f} | "
                              f"{statistics.median(x[2] for x in rows):.4f} | "
                              f"**{s['ratio']:.2f}**{{mark}} [{s['lo']:.2f}, {s['hi']:.2f}] | {s['q2']:.2f} "
                              f"[{s['q1']:.2f}, {s['q3']:.2f}] | {s['wins']}/{s['n']} |"))
            worst = max(x[0] for x in lines)
            for ratio, line in lines:        # * = the peer the goal binds at (largest ratio)
                print(line.replace("{mark}", "*" if ratio == worst and len(lines) > 1 else ""))


def cmd_decompose(args: argparse.Namespace) -> None:
    """Truncation bias alone on the keys the noisy runs share: duckdp rerun with the same seed and its metrics'
    noise removed (mean_gap_opendp.duckdp_noiseless), OpenDP's kept pairs in the order the run used."""
    from mean_gap_opendp import duckdp_noiseless
    d = Path(args.dir)
    true = json.loads((d / "truth.json").read_text())
    runs: dict[str, dict[int, dict]] = {}
    for line in (d / "runs.jsonl").read_text().splitlines():
        r = json.loads(line)
        runs.setdefault(r["tool"], {})[r["seed"]] = r
    path = Path(args.parquet)
    if not path.exists():
        ba.make_purchases(args.rows, path)
    spec = ba.dataset_spec("purchases", str(path), 10)
    seeds = sorted(set(runs["opendp"]))[: args.seeds]
    okept = {s: opendp_truncated(spec, 1000 + s) for s in seeds}
    print("| duckdp tool | metric | seeds | duckdp | duckdp no noise | OpenDP | OpenDP no noise | ratio | "
          "ratio, no noise [95 %] |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for t in args.tools.split(","):
        clean = {s: duckdp_noiseless(spec, t.split(":", 1)[1], 1.0, 1e-5, s) for s in seeds}
        for m in ("users", "sum", "mean"):
            rows = []
            for s in seeds:
                shared = set(runs[t][s]["released"]) & set(runs["opendp"][s]["released"])
                rows.append([med(rel_errs(x, true, shared, m)) for x in
                             (runs[t][s]["released"], clean[s], runs["opendp"][s]["released"], okept[s])])
            a, a0, b, b0 = (statistics.median(r[i] for r in rows) for i in range(4))
            q = spread([r[1] for r in rows], [r[3] for r in rows])
            print(f"| {t} | {m} | {len(rows)} | {a:.4f} | {a0:.4f} | {b:.4f} | {b0:.4f} | {a / b:.2f} | "
                  f"{q['ratio']:.2f} [{q['lo']:.2f}, {q['hi']:.2f}] |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--tools", required=True)
    r.add_argument("--seeds", required=True, help="A-B, inclusive")
    r.add_argument("--rows", type=int, default=1_000_000)
    r.add_argument("--epsilon", type=float, default=1.0)
    r.add_argument("--delta", type=float, default=1e-5)
    r.add_argument("--max-contributions", type=int, default=10)
    r.add_argument("--opendp-order", choices=("fixed", "seeded"), default="seeded")
    r.add_argument("--timeout", type=float, default=1800)
    q = sub.add_parser("report")
    q.add_argument("dirs", nargs="+")
    c = sub.add_parser("decompose")
    c.add_argument("dir")
    c.add_argument("--tools", default="duckdp:threshold,duckdp:adaptive_sips")
    c.add_argument("--seeds", type=int, default=10)
    c.add_argument("--rows", type=int, default=1_000_000)
    c.add_argument("--parquet", default="/tmp/purchases_seeds_1000000.parquet")
    args = ap.parse_args()
    {"run": cmd_run, "report": cmd_report, "decompose": cmd_decompose}[args.cmd](args)


if __name__ == "__main__":
    main()
