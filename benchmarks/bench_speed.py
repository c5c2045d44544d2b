"""Speed and peak memory of every duckdp mechanism against the raw-SQL floor, across table sizes.

For each size a synthetic table (DP-SIPS recipe, duckdp.datasets) is built and timed in one
process: the floor is the histogram every mechanism must at least compute — distinct (user, item)
pairs, keyed-hash truncation to Δ0 per user and the per-item sum of 1/√(kept size) (the query of
sql/stage_truncate.sql + stage_weights.sql) with no noise, threshold, validation or Python; a plain
GROUP BY count is printed for context. Each mechanism runs through `duckdp.select` (ρ = 0.1 zCDP,
δ = 1e-5 where it takes zCDP, else ε = 1, δ = 1e-5; Δ0 = 100; baselines with allow_unproven=True).
Reported: median wall time, its ratio to the floor, peak RSS of the process during the runs and the
rise over the RSS before them. A log–log plot of time vs rows is saved as a PNG (needs matplotlib).

Peers (PipelineDP, OpenDP, PyDP) are reported as skipped when not importable; no adapter is run.

    python benchmarks/bench_speed.py                                   # 1M, 10M, 50M rows, 3 repeats
    python benchmarks/bench_speed.py --rows 200000 --repeat 1 --algos weighted_gaussian dpsips
    python benchmarks/bench_speed.py --rows 10000000 --threads 1 2 4 8 16 --algos weighted_gaussian mad dpsips mad2r
    python benchmarks/bench_speed.py --rows 10000000 --repeat 3 --threads 2 --key-type bigint varchar composite
    python benchmarks/bench_speed.py --rows 2000000 --repeat 1 --threads 2 --skewed-user-keys 0 2000000

--key-type times the same table with its key as BIGINT (the zeta draw), VARCHAR ('item_' || n) or a
composite (VARCHAR 'item_' || n // 8, INTEGER n % 8) key; the floor groups by the same columns.
Releases are unseeded by default (the production path: for non-integer keys the noise counters are
stream positions, duckdp/noise_stage.py); --release-seed times the seeded path instead.

--skewed-user-keys N adds one user holding N distinct keys (items 1..N, user id −1) to the same
table (issue #21 item 2: one heavy user must cost about what its rows cost); several values time
the table with each (0 = without it), e.g. `--skewed-user-keys 0 2000000`.

With several --threads the table is built once per size and everything is timed at each thread
count (DuckDB's `threads` setting, which duckdp's numpy noise pool follows too); a final table
gives each mechanism's ratio to the floor per (rows, threads).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing
import duckdp  # noqa: E402
from duckdp.datasets import create_synthetic  # noqa: E402

DELTA0 = 100
# Targets of issue #11 (ratio to the floor) by thread count: 16 threads (100M rows), and 2 threads
# (today's ratios at 10M must not get worse); other thread counts use the nearest one at or below.
# Mechanisms without one print "–".
TARGETS = {2: {"weighted_gaussian": 1.06, "mad": 1.5, "dpsips": 2.0, "mad2r": 3.0,
               "adaptive_sips": 3.5},      # issue #12: adaptive_sips ≤ 3.5× at 10M rows
           16: {"weighted_gaussian": 1.3, "mad": 1.8, "dpsips": 3.0, "mad2r": 4.0}}


def target(name: str, threads: int) -> float | None:
    """Issue #11's ratio target for `name` at `threads` (the 2-thread one below 16 threads)."""
    return TARGETS[16 if threads >= 16 else 2].get(name)
PEERS = {"PipelineDP": "pipeline_dp", "OpenDP": "opendp", "PyDP": "pydp"}

FLOOR_SQL = """
WITH pairs AS (      -- distinct (user, item) pairs
  SELECT DISTINCT user_id, {keys} FROM synth
), sizes AS (        -- each user's distinct-item count
  SELECT user_id, count(*) AS size FROM pairs GROUP BY user_id
), sized AS (
  SELECT pairs.*, size FROM pairs JOIN sizes USING (user_id)
), bounded AS (      -- at most Δ0 items per user (keyed-hash order), weight 1/√(kept size)
  SELECT {keys}, pow(size, -0.5) AS w FROM sized WHERE size <= {delta0}
  UNION ALL
  SELECT {keys}, pow({delta0}, -0.5) FROM sized WHERE size > {delta0}
  QUALIFY row_number() OVER (PARTITION BY user_id ORDER BY hash(xor(hash(user_id, {keys}), $salt))) <= {delta0}
), weighted AS (     -- per-item weight sums
  SELECT {keys}, sum(w) AS w FROM bounded GROUP BY {keys}
)
SELECT {keys} FROM weighted WHERE w >= $threshold   -- same output as a release: the keys
"""
KEY_TYPES = {   # key columns, and the table `synth` rebuilt from the BIGINT draw with that key type
    "bigint": (["item"], None),
    "varchar": (["item"], "SELECT user_id, 'item_' || item AS item FROM synth"),
    "composite": (["item", "part"], "SELECT user_id, 'item_' || (item // 8) AS item, (item % 8)::INTEGER AS part "
                                    "FROM synth"),
}
FLOOR_THRESHOLD = 11.726070   # weighted_gaussian's T at ρ = 0.1, δ = 1e-5, Δ0 = 100 (DP-SIPS Alg. 2)
GROUP_BY_SQL = "SELECT count(*), sum(n) FROM (SELECT {keys}, count(*) AS n FROM synth GROUP BY {keys})"
FLOOR, GROUP_BY = "raw-SQL floor", "GROUP BY count (context)"


class PeakRSS:
    """Peak resident set size of this process while the block runs (sampled from /proc every 5 ms)."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()

    @staticmethod
    def current() -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:   # not Linux: the lifetime peak is the best available
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            self._stop.wait(0.005)

    def __enter__(self):
        self.before = self.peak = self.current()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.current())


def measure(fn, repeat: int) -> dict:
    """Median seconds over `repeat` calls, peak RSS and its rise over the RSS before, and the last result."""
    times, peak, rise, out = [], 0, 0, None
    for _ in range(repeat):
        with PeakRSS() as rss:
            start = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - start)
        peak, rise = max(peak, rss.peak), max(rise, rss.peak - rss.before)
    return {"seconds": statistics.median(times), "peak": peak, "rise": rise, "result": out}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def budget_for(info: dict) -> dict:
    return {"rho": 0.1, "delta": 1e-5} if "rho/delta" in info["budgets"] else {"epsilon": 1.0, "delta": 1e-5}


def run_size(rows: int, algos: list[dict], repeat: int, seed: int, threads: list[int | None], key_types: list[str],
             release_seed: int | None, skewed: list[int]) -> list[dict]:
    """Build one synthetic table of `rows` rows and time everything on it at each skewed-user size, key
    type and thread count."""
    con = duckdb.connect()
    t0 = time.perf_counter()
    create_synthetic(con, "synth", rows, seed=seed)
    users, items = con.sql("SELECT count(DISTINCT user_id), count(DISTINCT item) FROM synth").fetchall()[0]
    print(f"\n## {rows:,} rows: {users:,} users, {items:,} items (built in {time.perf_counter() - t0:.1f} s)\n")
    con.execute("ALTER TABLE synth RENAME TO synth_plain")
    out = []
    for heavy in skewed:
        con.execute("CREATE OR REPLACE TABLE synth_bigint AS SELECT * FROM synth_plain UNION ALL "
                    "SELECT -1 AS user_id, range AS item FROM range(1, $n + 1)", {"n": heavy})
        for key_type in key_types:
            keys, rebuild = KEY_TYPES[key_type]
            con.execute("CREATE OR REPLACE TABLE synth AS " + (rebuild or "SELECT * FROM synth").replace(
                "FROM synth", "FROM synth_bigint"))
            for t in threads:
                if t:
                    con.execute(f"SET threads = {int(t)}")
                (now,), = con.sql("SELECT current_setting('threads')").fetchall()
                skew = f", one user with {heavy:,} keys" if heavy else ""
                print(f"\n### {rows:,} rows{skew}, {key_type} keys, {now} threads\n")
                out += [r | {"threads": int(now), "key_type": key_type, "skewed": heavy}
                        for r in time_all(con, rows, algos, repeat, release_seed, int(now), keys)]
    con.close()
    return out


def time_all(con, rows: int, algos: list[dict], repeat: int, seed: int | None, threads: int,
             keys: list[str]) -> list[dict]:
    """Time the floor, the GROUP BY and every mechanism on table `synth` keyed by `keys`; print the table."""
    cols = ", ".join(keys)
    floor_sql, group_sql = FLOOR_SQL.format(keys=cols, delta0=DELTA0), GROUP_BY_SQL.format(keys=cols)
    floor_params = {"salt": 0x1234_5678_9ABC_DEF0, "threshold": FLOOR_THRESHOLD}   # 63-bit, like a run salt
    con.sql(floor_sql, params=floor_params).to_arrow_table()   # warm-up: first touch of the table
    out = [{"rows": rows, "name": FLOOR,
            **measure(lambda: con.sql(floor_sql, params=floor_params).to_arrow_table(), repeat)},
           {"rows": rows, "name": GROUP_BY, **measure(lambda: con.sql(group_sql).fetchall(), repeat)}]
    item_col = keys[0] if len(keys) == 1 else keys
    for info in algos:
        extra = {"allow_unproven": True} if info.get("unproven") else {}
        kw = budget_for(info) | extra
        res = measure(lambda info=info, kw=kw: duckdp.select(con, "synth", algo=info["name"], max_contributions=DELTA0,
                                                             item_col=item_col, seed=seed, **kw),
                      repeat)
        out.append({"rows": rows, "name": info["name"], "budget": kw, **res, "released": len(res["result"])})
    floor = out[0]["seconds"]
    print("| query | budget | median s | × floor | target | peak RSS MB | RSS rise MB | released |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in out:
        goal = target(r["name"], threads)
        ratio = r["seconds"] / floor
        verdict = "–" if goal is None else f"≤ {goal:g}× {'✓' if ratio <= goal else '✗'}"
        budget = ", ".join(f"{k}={v:g}" for k, v in r.get("budget", {}).items() if k != "allow_unproven")
        print(f"| {r['name']} | {budget or '–'} | {r['seconds']:.3f} | {ratio:.2f} | {verdict} | "
              f"{r['peak'] / 2**20:,.0f} | {r['rise'] / 2**20:,.0f} | {r.get('released', '–')} |")
    return out


def plot(results: list[dict], path: Path) -> None:
    """Log–log seconds vs rows, one line per query; the floor in black."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"\nmatplotlib not installed: no plot written ({path})")
        return
    fig, ax = plt.subplots(figsize=(10, 5))
    names = list(dict.fromkeys(r["name"] for r in results))
    colors = plt.cm.tab20.colors
    for i, name in enumerate(names):
        pts = sorted((r["rows"], r["seconds"]) for r in results if r["name"] == name)
        style = {"color": "black", "linewidth": 2.5} if name == FLOOR else (
            {"color": "gray", "linestyle": ":"} if name == GROUP_BY else {"color": colors[i % 20]})
        ax.plot(*zip(*pts, strict=True), marker="o", label=name, **style)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows (synthetic, DP-SIPS recipe)")
    ax.set_ylabel("median wall time, s")
    ax.set_title(f"duckdp speed vs rows (Δ0 = {DELTA0}; DuckDB {duckdb.__version__}, {os.cpu_count()} CPUs)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nplot written to {path}")


def sweep(results: list[dict]) -> None:
    """The ratio table of issue #11: floor seconds and each mechanism's × floor (and seconds) per
    (rows, threads), ✗ where the issue's target for that thread count is missed."""
    names = [n for n in dict.fromkeys(r["name"] for r in results) if n not in (FLOOR, GROUP_BY)]
    print("\n## × floor by rows, skewed user, key type and threads\n")
    print("| rows | skewed user keys | key | threads | floor s | " + " | ".join(names) + " |")
    print("|---:|---:|---|---:|---:|" + "---:|" * len(names))
    for rows, skewed, key_type, threads in dict.fromkeys((r["rows"], r["skewed"], r["key_type"], r["threads"])
                                                         for r in results):
        cell = {r["name"]: r["seconds"] for r in results if r["rows"] == rows and r["threads"] == threads
                and r["key_type"] == key_type and r["skewed"] == skewed}
        floor = cell[FLOOR]
        marks = {n: "" if target(n, threads) is None else (" ✓" if cell[n] / floor <= target(n, threads) else " ✗")
                 for n in names}
        print(f"| {rows:,} | {skewed:,} | {key_type} | {threads} | {floor:.3f} | "
              + " | ".join(f"{cell[n] / floor:.2f}×{marks[n]} ({cell[n]:.2f} s)" for n in names) + " |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000, 50_000_000],
                    help="synthetic table sizes (default 1M 10M 50M)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per query; the median is reported")
    ap.add_argument("--algos", nargs="+", default=None, help="mechanisms to time (default: all of duckdp.algorithms())")
    ap.add_argument("--threads", type=int, nargs="+", default=[None],
                    help="DuckDB thread counts to sweep, e.g. 1 2 4 8 16 (default: DuckDB's)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic tables")
    ap.add_argument("--release-seed", type=int, default=None,
                    help="seed the releases (times the seeded path; default: unseeded, as in production)")
    ap.add_argument("--key-type", nargs="+", choices=list(KEY_TYPES), default=["bigint"],
                    help="key column type(s) of the same table: bigint, varchar, composite (default bigint)")
    ap.add_argument("--skewed-user-keys", type=int, nargs="+", default=[0],
                    help="add one user with N distinct keys; several values time each (default 0: none)")
    ap.add_argument("--plot", type=Path, default=Path(__file__).resolve().parent / "speed_scaling.png",
                    help="PNG path of the scaling plot")
    args = ap.parse_args(argv)

    known = {a["name"]: a for a in duckdp.algorithms()}
    wanted = args.algos or list(known)
    for a in wanted:
        if a not in known:
            print(f"note: skipping {a!r}: not in duckdp.algorithms()")
    algos = [known[a] for a in wanted if a in known]
    print(f"# duckdp speed — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("command: python benchmarks/bench_speed.py " + " ".join(sys.argv[1:] if argv is None else argv) + "\n")
    print(f"machine: {platform.platform()}, {cpu_name()}, {os.cpu_count()} CPUs; "
          f"Python {platform.python_version()}, DuckDB {duckdb.__version__}, duckdp {duckdp.__version__}; "
          f"Δ0 = {DELTA0}, median of {args.repeat}")
    peers = [f"{name} ({'installed, no adapter run' if importlib.util.find_spec(mod) else 'not installed'})"
             for name, mod in PEERS.items()]
    print("peers: " + ", ".join(peers) + " — skipped")

    results = []
    for rows in args.rows:
        results += run_size(rows, algos, args.repeat, args.seed, args.threads, args.key_type, args.release_seed,
                            args.skewed_user_keys)
    sweep(results)
    single = len(args.threads) == 1 and len(args.key_type) == 1 and len(args.skewed_user_keys) == 1
    if len(args.rows) > 1 and single:
        print("\n## × floor by size\n")
        print("| query | " + " | ".join(f"{n:,} rows" for n in args.rows) + " |")
        print("|---|" + "---:|" * len(args.rows))
        floors = {r["rows"]: r["seconds"] for r in results if r["name"] == FLOOR}
        for name in dict.fromkeys(r["name"] for r in results):
            cells = [f"{r['seconds'] / floors[r['rows']]:.2f}" for n in args.rows for r in results
                     if r["name"] == name and r["rows"] == n]
            print(f"| {name} | " + " | ".join(cells) + " |")
    if single:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
