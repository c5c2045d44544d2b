"""Pin seeded releases: one small synthetic table, every mechanism and count release, DuckDB.

Writes tests/pinned_releases.json; tests/test_pinned_releases.py recomputes every entry and compares
exactly, so a refactor that changes any seeded release (keys, count, a round's σ or threshold, count
release's noisy counts) fails the fast suite. Regenerate only for a deliberate behaviour change:

    PYTHONPATH=. python benchmarks/pin_releases.py
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb

import duckdp
from duckdp.datasets import create_synthetic

PIN_FILE = Path(__file__).resolve().parents[1] / "tests" / "pinned_releases.json"
ROWS = 60_000               # duckdp.datasets recipe (DP-SIPS §5.1), small enough for the fast suite
DATA_SEED = 19
SEED = 1234                 # the release seed
MAX_CONTRIBUTIONS = 10
BUDGETS = {"epsilon/delta": {"epsilon": 40.0, "delta": 1e-5}, "rho/delta": {"rho": 200.0, "delta": 1e-5}}
COUNT_RELEASE = {"rho": 200.0, "delta": 1e-5, "kbar": 200}
KEY_TYPES = {"BIGINT": False, "VARCHAR": True}      # key type → string_items


def _sha(values: list) -> str:
    return hashlib.sha256(json.dumps(values, separators=(",", ":")).encode()).hexdigest()


def _keys(release: duckdp.Release) -> list:
    keys = release.to_arrow().column("item").to_pylist()
    return [int(k) if isinstance(k, int) else str(k) for k in keys]


def _rounds(release: duckdp.Release) -> list[dict[str, Any]]:
    return [{"sigma": repr(float(r.sigma)), "threshold": repr(float(r.threshold)), "released": int(r.released)}
            for r in release.rounds]


def pin_entry(release: duckdp.Release) -> dict[str, Any]:
    """What a seeded release must keep: the sorted keys' SHA-256, their count, every round's σ and T.

    Row order is not pinned (the released keys' order is the output stage's business).
    """
    keys = _keys(release)
    entry: dict[str, Any] = {"keys_sha256": _sha(sorted(keys)), "count": len(keys), "rounds": _rounds(release)}
    table = release.to_arrow()
    if "noisy_count" in table.column_names:           # count release: (key, noisy count, σ) in key order
        rows = zip(keys, table.column("noisy_count").to_pylist(), table.column("sigma").to_pylist(), strict=True)
        entry["noisy_counts"] = [[k, int(c), repr(float(s))] for k, c, s in sorted(rows)]
    return entry


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    """(case name, algo, keyword arguments) for every mechanism × budget kind it takes, plus count release."""
    out = []
    for mech in duckdp.algorithms():
        for kind in mech["budgets"]:
            kwargs: dict[str, Any] = dict(BUDGETS[kind], max_contributions=MAX_CONTRIBUTIONS)
            if mech["unproven"]:
                kwargs["allow_unproven"] = True
            out.append((f"{mech['name']}[{kind}]", mech["name"], kwargs))
    out.append(("count_release[rho/delta]", "count_release", dict(COUNT_RELEASE)))
    return out


def run_case(con: duckdb.DuckDBPyConnection, table: str, algo: str, kwargs: dict[str, Any]) -> duckdp.Release:
    if algo == "count_release":
        return duckdp.count_release(con, table, seed=SEED, **kwargs)
    return duckdp.select(con, table, algo=algo, seed=SEED, **kwargs)


def make_tables(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Key type → table name, both built from the same (ROWS, DATA_SEED)."""
    tables = {}
    for key_type, string_items in KEY_TYPES.items():
        name = f"pins_{key_type.lower()}"
        create_synthetic(con, name, ROWS, DATA_SEED, string_items=string_items)
        tables[key_type] = name
    return tables


def compute() -> dict[str, Any]:
    con = duckdb.connect()
    try:
        tables = make_tables(con)
        pins: dict[str, Any] = {}
        for key_type, table in tables.items():
            for name, algo, kwargs in cases():
                pins[f"{name}[{key_type}]"] = pin_entry(run_case(con, table, algo, kwargs))
        return pins
    finally:
        con.close()


def main() -> None:
    pins = compute()
    PIN_FILE.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(pins)} pinned releases to {PIN_FILE}")


if __name__ == "__main__":
    main()
