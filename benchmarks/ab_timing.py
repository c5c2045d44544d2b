"""Shared pieces of the paired A/B benchmarks (ab_*.py): the wall and CPU seconds of one call, the order
in which a repeat runs its variants — reversed every other repeat, so a change of machine load between two
variants hits each side alike — the synthetic input with its raw-SQL floor (bench_speed.py's), and the options
and connection of the A/Bs on bench_large.py's table `big`."""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")


def synthetic_with_floor(rows: int, key_type: str, threads: int) -> tuple[Any, Callable[[], Any]]:
    """(a DuckDB connection holding bench_speed.py's synthetic table `synth` of `rows` rows with keys of
    `key_type`, set to `threads` threads; the raw-SQL floor on it, run once to warm up)."""
    import duckdb
    from bench_speed import DELTA0, FLOOR_SQL, FLOOR_THRESHOLD, KEY_TYPES

    from duckdp.datasets import create_synthetic

    con = duckdb.connect()
    create_synthetic(con, "synth_bigint", rows, seed=0)
    keys, rebuild = KEY_TYPES[key_type]
    select = (rebuild or "SELECT * FROM synth").replace("FROM synth", "FROM synth_bigint")
    con.execute("CREATE TABLE synth AS " + select)
    con.execute(f"SET threads = {int(threads)}")
    floor_sql = FLOOR_SQL.format(keys=", ".join(keys), delta0=DELTA0)
    floor_params = {"salt": 0x1234_5678_9ABC_DEF0, "threshold": FLOOR_THRESHOLD}

    def floor() -> Any:
        return con.sql(floor_sql, params=floor_params).to_arrow_table()

    floor()
    return con, floor


def big_table_parser(doc: str) -> argparse.ArgumentParser:
    """The options of an A/B on bench_large.py's table `big` (ab_one_scan.py, ab_truncation_passes.py): its
    database, DuckDB's memory limit and threads, the repeats; described by `doc`'s first line."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("db", help="a database with table `big` (user_id, item, value) from bench_large.py --aggregate")
    ap.add_argument("--memory-limit", default="2GB")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    return ap


def connect_big(args: argparse.Namespace, read_only: bool = False) -> Any:
    """A connection to `args.db` set as `big_table_parser`'s options say, insertion order not kept (as duckdp's
    large runs), spilling to a fresh temporary directory."""
    import duckdb

    con = duckdb.connect(args.db, read_only=read_only)
    con.execute("SET memory_limit = $m", {"m": args.memory_limit})
    con.execute("SET threads = $t", {"t": args.threads})
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET temp_directory = $d", {"d": tempfile.mkdtemp(prefix="duckdp_ab_")})
    return con


def cpu_seconds() -> float:
    """User + system CPU seconds of this process, all its threads (DuckDB's included), and of its ended children,
    at µs resolution (os.times ticks every 10 ms: too coarse for a small release)."""
    use, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime + kids.ru_utime + kids.ru_stime     # + aggregate's draw workers, once ended


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall s, CPU s of this process and its threads, result) of one call of `fn`."""
    c, w = cpu_seconds(), time.perf_counter()
    out = fn()
    return time.perf_counter() - w, cpu_seconds() - c, out


def alternating(variants: Sequence[T], repeat: int) -> Sequence[T]:
    """The variants in order on even repeats, reversed on odd ones."""
    return variants if repeat % 2 == 0 else variants[::-1]


def paired(repeat: int, floor: Callable[[], Any], algos: Sequence[str], names: Sequence[str],
           run: Callable[[str, str], Any], prepare: Callable[[str], None] = lambda name: None,
           ) -> tuple[dict[str, list[tuple[float, float]]], list[float]]:
    """({"floor" | "algo/name": [(wall s, CPU s) per repeat]}, load averages): each repeat times the floor,
    then every algo's variants in alternating order; `prepare(name)` runs untimed before each variant."""
    res: dict[str, list[tuple[float, float]]] = {"floor": []}
    loads = []
    for r in range(repeat):
        loads.append(os.getloadavg()[0])
        res["floor"].append(timed(floor)[:2])
        for algo in algos:
            for name in alternating(names, r):
                prepare(name)
                res.setdefault(f"{algo}/{name}", []).append(timed(partial(run, name, algo))[:2])
    return res, loads


def report(res: dict[str, list[tuple[float, float]]], loads: list[float], header: str, algos: Sequence[str]) -> None:
    """Print `paired`'s medians as a table (× the floor's median) and each algo's median paired CPU saving
    (old − new: positive means new is cheaper)."""
    fw, fc = (statistics.median(x[i] for x in res["floor"]) for i in (0, 1))
    print(f"# {header}, load average {min(loads):.1f}–{max(loads):.1f}")
    print("| run | wall s | × floor | CPU s | × floor |")
    print("|---|---:|---:|---:|---:|")
    for label, v in res.items():
        w, c = (statistics.median(x[i] for x in v) for i in (0, 1))
        print(f"| {label} | {w:.3f} | {w / fw:.2f} | {c:.3f} | {c / fc:.2f} |")
    for algo in algos:
        saving = statistics.median(o[1] - n[1] for o, n in zip(res[f"{algo}/old"], res[f"{algo}/new"], strict=True))
        print(f"{algo}: median paired CPU saving {saving:.3f} s")
