"""Users truncation bias on PipelineDP's released purchases keys (stop 32, RESULTS.md "Private GROUP BY vs peers
on purchases, many seeds"): duckdp keys="threshold" with its metrics' noise removed (mean_gap_opendp's
`duckdp_noiseless`) vs a uniform per-user sample of Δ0 distinct keys (no noise) vs PipelineDP's released users,
on PipelineDP's keys, first 8 seeds of `purchases_seeds.py run` dumps (truth in D/truth.json, PipelineDP in P).

    PYTHONPATH=$PWD /work/venvs/peers/bin/python benchmarks/purchases_pdp_users.py /tmp/p30/d /tmp/p30/pdp
"""
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_aggregate as ba  # noqa: E402
from mean_gap_opendp import duckdp_noiseless, med, rel_errs  # noqa: E402

t = json.loads((Path(sys.argv[1]) / "truth.json").read_text())
pdp = {r["seed"]: r for r in map(json.loads, (Path(sys.argv[2]) / "runs.jsonl").read_text().splitlines())}
path = Path("/tmp/purchases_seeds_1000000.parquet")
if not path.exists():
    ba.make_purchases(1_000_000, path)
spec = ba.dataset_spec("purchases", str(path), 10)
df = pl.read_parquet(spec["path"], columns=["user_id", "product"]).unique()
out = []
for s in sorted(pdp)[:8]:
    keys = set(pdp[s]["released"])
    clean = duckdp_noiseless(spec, "threshold", 1.0, 1e-5, s)
    sh = keys & set(clean)
    rng = np.random.default_rng(s)
    d = df.with_columns(pl.Series("r", rng.random(df.height)))
    d = d.filter(pl.col("r").rank("ordinal").over("user_id") <= 10)
    g = d.group_by("product").agg(pl.len().alias("n"))
    samp = {str(k): {"users": float(n)} for k, n in zip(g["product"], g["n"], strict=True)}
    row = (med(rel_errs(clean, t, sh, "users")), med(rel_errs(samp, t, sh, "users")),
           med(rel_errs(pdp[s]["released"], t, sh, "users")))
    out.append(row)
    print(s, len(sh), *(round(x, 4) for x in row), flush=True)
m = [statistics.median(x[i] for x in out) for i in range(3)]
print(f"median: duckdp threshold no noise {m[0]:.4f}, uniform per-user sample no noise {m[1]:.4f}, "
      f"PipelineDP released {m[2]:.4f}")
