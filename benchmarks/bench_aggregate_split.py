"""PROTOTYPE (no engine code yet, issue #20 waits for #19): how to split ρ between key selection and
the metrics of a private GROUP BY, measured on MovieLens 100k (per movie: ratings count, mean rating).

For each selection mechanism (adaptive_sips, dpsips, and keys="threshold"), ρ and selection share s:
the plan comes from `duckdp.privacy.aggregate.plan_aggregate` (the real privacy core); `duckdp.select`
releases keys on the plan's selection budget (seeded) — keys="threshold" is thresholded in numpy from
the plan's σ_t and T; the metrics are then computed **in numpy, not by an engine**,
following the spec's stages (docs/specs/private-group-by.md §2): rows restricted to the released
keys, each user's keys cut to Δ0 by a seeded random order, ratings clipped to [1, 5] on the plan's
grid, per-key count and centred sum, exact discrete Gaussian noise with the plan's σ
(`discrete_gaussian_array`), `finish` for the mean. It reports keys released, the median relative
error of count and mean against the true (unbounded) values — on all released keys and on the keys
every share releases — and the keys whose count and mean are both within 10 %; then the same against
the bounded values the noise is added to ("noise"), which isolates what the split controls from the
truncation bias that Δ0 controls.

    nice -n 10 python benchmarks/bench_aggregate_split.py            # ρ ∈ {0.1, 1}, Δ0 ∈ {50, 150}, 3 trials (~2 min)
    nice -n 10 python benchmarks/bench_aggregate_split.py --rhos 0.5 --trials 1
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.discrete import discrete_gaussian_array  # noqa: E402
from duckdp.prf import PRFKey  # noqa: E402
from duckdp.privacy.aggregate import THRESHOLD_TAG, finish, plan_aggregate  # noqa: E402
from duckdp.privacy.budget import ZCDP  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "movielens_100k_ratings.parquet"
SHARES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
ALGOS = ("adaptive_sips", "dpsips", "threshold")
METRICS = {"ratings": "count", "avg": ("mean", "rating", 1, 5)}
DELTA = 1e-6


def first_per_user(users, limit, seed):
    """Indices of ≤ `limit` rows per user in a seeded random order (MovieLens: one row per (user, movie))."""
    order = np.lexsort((np.random.default_rng(seed).random(users.size), users))
    u = users[order]
    first = np.r_[True, u[1:] != u[:-1]]
    rank = np.arange(u.size) - np.maximum.accumulate(np.where(first, np.arange(u.size), 0))
    return order[rank < limit]


def threshold_prototype(plan, users, items, seed):
    """keys="threshold" (spec §4.2) in numpy: Δ0 keys per user over all keys, distinct-user counts c ≥ 1,
    c + N_Z(0, σ_t²) ≥ T (noise keyed by the key's index among the keys present: prototype counters)."""
    kept = first_per_user(users, plan.max_contributions, seed)
    keys, c = np.unique(items[kept], return_counts=True)
    key = PRFKey.from_seed(seed).derive(b"aggm", THRESHOLD_TAG)
    z = discrete_gaussian_array(key, np.zeros(keys.size, np.uint64), np.arange(keys.size, dtype=np.uint64),
                                plan.threshold.sigma)
    return keys[c + z >= plan.threshold.threshold]


def metrics_prototype(plan, users, items, ratings, released, seed):
    """Noisy count and mean per released key (sorted), by the spec's stages in numpy (prototype), and the
    bounded (truncated, clipped) count and mean they estimate."""
    keep = np.isin(items, released)                 # restrict to K, then ≤ Δ0 keys per user
    u, it, r = users[keep], items[keep], ratings[keep]
    kept = first_per_user(u, plan.max_contributions, seed)
    it, r = it[kept], r[kept]
    ms, mc = plan.measure("avg", "sum"), plan.measure("avg", "count")
    cnt = plan.measure("ratings", "count")
    idx = np.searchsorted(released, it)
    grid = np.round(np.clip(r, 1, 5) / ms.step).astype(np.int64) - ms.offset
    true_count = np.bincount(idx, minlength=released.size).astype(np.int64)
    true_sum = np.bincount(idx, weights=grid, minlength=released.size).astype(np.int64)
    key = PRFKey.from_seed(seed)
    hi, lo = np.zeros(released.size, np.uint64), np.arange(released.size, dtype=np.uint64)

    def noise(m):
        return discrete_gaussian_array(key.derive(b"aggm", m.tag), hi, lo, m.sigma)

    noisy = {("ratings", "count"): true_count + noise(cnt),
             ("avg", "sum"): true_sum + noise(ms), ("avg", "count"): true_count + noise(mc)}
    out = finish(plan, noisy)
    with np.errstate(divide="ignore", invalid="ignore"):
        bounded_mean = (ms.offset + true_sum / true_count) * ms.step
    return out["ratings"], out["avg"], true_count, bounded_mean


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rhos", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--d0", type=int, nargs="+", default=[50, 150], help="Δ0 (max_contributions) values")
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    con = duckdb.connect()
    con.execute("CREATE TABLE ratings AS SELECT user_id, item, rating FROM read_parquet(?)", [str(DATA)])
    users, items, ratings = (con.sql("SELECT user_id, item, rating FROM ratings").fetchnumpy()[c]
                             for c in ("user_id", "item", "rating"))
    items = np.asarray(items, dtype=object).astype(str)
    truth = con.sql("SELECT item, count(*) AS n, avg(rating) AS m FROM ratings GROUP BY item").fetchnumpy()
    true_n = dict(zip(np.asarray(truth["item"], dtype=object).astype(str), truth["n"], strict=True))
    true_m = dict(zip(np.asarray(truth["item"], dtype=object).astype(str), truth["m"], strict=True))
    start = time.time()
    print(f"MovieLens 100k, max_rows_per_key = 1, δ = {DELTA:g}, zCDP; metrics: count, mean rating [1, 5]; "
          f"{args.trials} trials (medians over trials)")
    for rho, d0 in ((r, d) for r in args.rhos for d in args.d0):
        print(f"\nρ = {rho:g}, Δ0 = {d0}")
        print("| mechanism | share | keys | count err | mean err | same-keys count err | same-keys mean err "
              "| keys both ≤ 10 % | count noise err | mean noise err | keys both ≤ 10 % (noise) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for algo in ALGOS:
            rows = {}
            for s in SHARES:
                mode = "threshold" if algo == "threshold" else "select"
                plan = plan_aggregate(ZCDP(rho, DELTA), METRICS, max_contributions=d0, keys=mode,
                                      algo=None if mode == "threshold" else algo, selection_share=s)
                runs = []
                for t in range(args.trials):
                    if mode == "threshold":
                        released = threshold_prototype(plan, users, items, 1000 * t + 7)
                    else:
                        sel = plan.selection_budget
                        rel = duckdp.select(con, "ratings", algo=algo, rho=sel.rho, delta=sel.delta,
                                            max_contributions=d0, seed=1000 * t + 7)
                        released = np.sort(np.asarray(rel.items.fetchnumpy()["item"], dtype=object).astype(str))
                    count, mean, bn, bm = metrics_prototype(plan, users, items, ratings, released, 1000 * t + 11)
                    n = np.array([true_n[k] for k in released], dtype=float)
                    m = np.array([true_m[k] for k in released], dtype=float)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        noise_c, noise_m = np.abs(count - bn) / bn, np.abs(mean - bm) / bm
                    runs.append((released, np.abs(count - n) / n, np.abs(mean - m) / m, noise_c, noise_m))
                rows[s] = runs
            common = [set.intersection(*(set(rows[s][t][0]) for s in SHARES)) for t in range(args.trials)]
            for s in SHARES:
                keys, ec, em, sc, sm, good, nc, nm, ngood = [], [], [], [], [], [], [], [], []
                for t, (released, err_c, err_m, noise_c, noise_m) in enumerate(rows[s]):
                    same = np.array([k in common[t] for k in released], dtype=bool)
                    keys.append(released.size)
                    ec.append(np.median(err_c) if released.size else np.nan)
                    em.append(np.median(err_m) if released.size else np.nan)
                    sc.append(np.median(err_c[same]) if same.any() else np.nan)
                    sm.append(np.median(err_m[same]) if same.any() else np.nan)
                    good.append(int(np.sum((err_c <= 0.1) & (err_m <= 0.1))))
                    nc.append(np.median(noise_c) if released.size else np.nan)
                    nm.append(np.median(noise_m) if released.size else np.nan)
                    ngood.append(int(np.sum((noise_c <= 0.1) & (noise_m <= 0.1))))
                med = statistics.median
                print(f"| {algo} | {s:.1f} | {med(keys):.0f} | {med(ec):.3f} | {med(em):.3f} | {med(sc):.3f} "
                      f"| {med(sm):.3f} | {med(good):.0f} | {med(nc):.3f} | {med(nm):.3f} | {med(ngood):.0f} |")
    print(f"\ntotal {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
