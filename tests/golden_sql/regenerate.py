"""Golden rendered SQL: every template each mechanism renders, on a fixed small input, as review-able files.

    PYTHONPATH=. python tests/golden_sql/regenerate.py      # rewrite tests/golden_sql/<case>/<template>.sql

Each mechanism (and count release) runs seeded on DuckDB over a fixed 8-user table; every
`Template.render` call is recorded, and `<case>/<template>.sql` lists that template's renderings in
call order with the values they bind. Run ids (hence TEMP table and view names) are fixed to
`000000000000` by patching `secrets.token_hex` here only; production keeps its random ids. Extra
cases: string keys (digest counters, sql/noise_weights.sql + noise_scan_ranked.sql), truncation
in two user-hash passes (stage_truncate_light.sql + stage_truncate_pass.sql; MAD2R's lazy candidates too,
its cost rule overridden there and on key ids: LAZY_MAD2R),
MAD2R on string keys (its eager screen, mad2r_universe.sql, which lazy round-1 noise skips), truncation="global"
(DP-SIPS: the order hashes the key alone), and string keys on key ids (multi-round mechanisms'
unseeded path, stage_key_ids.sql, stage_pairs_ids.sql, stage_output_ids.sql: rendered with the
seed's salts, the randomness marked unseeded).
tests/test_golden_sql.py renders the same and compares, so a template edit shows in review as a diff here.
"""
from __future__ import annotations

import secrets
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb
import pyarrow as pa

import duckdp
from duckdp.mechanisms.mad import duckdb as mad_duckdb
from duckdp.rng import Randomness
from duckdp.stages.duckdb import DuckDBStages
from duckdp.templates import Template

GOLDEN = Path(__file__).resolve().parent
SEED = 7
RUN_ID = "0" * 12
# MAD2R cases rendered with lazy round-1 noise (its cost rule would pick eager on this tiny table)
LAZY_MAD2R = ("mad2r+passes", "mad2r+key_ids")
_SETS = {0: [1, 2, 3], 1: [1, 2], 2: [1], 3: [2, 3, 4, 5, 6], 4: [1, 3], 5: [1, 2, 3], 6: [7], 7: [1, 2, 4]}


def _table(con: duckdb.DuckDBPyConnection, name: str, string_keys: bool) -> str:
    rows = [(u, k) for u, ks in _SETS.items() for k in ks]
    items: Any = [f"k{k}" for _, k in rows] if string_keys else pa.array([k for _, k in rows], pa.int64())
    con.register("_golden_src", pa.table({"user_id": pa.array([u for u, _ in rows], pa.int64()), "item": items}))
    con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _golden_src')
    con.unregister("_golden_src")
    return name


def _value(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return repr(v)


@contextmanager
def recording() -> Iterator[list[tuple[str, str, dict]]]:
    """Every template rendering (name, SQL text, bound values) while active, with fixed run ids."""
    calls: list[tuple[str, str, dict]] = []
    render = Template.render

    def record(self: Template, idents: dict[str, str], params: dict) -> tuple[str, dict]:
        sql, bound = render(self, idents, params)
        calls.append((self.name, sql, bound))
        return sql, bound

    with mock.patch.object(Template, "render", record), mock.patch.object(secrets, "token_hex", lambda n=None: RUN_ID):
        yield calls


def cases() -> dict[str, tuple[bool, Callable[[duckdb.DuckDBPyConnection, str], object]]]:
    """Case name → (string keys?, the release to run on a connection and table)."""
    out: dict[str, tuple[bool, Callable[[duckdb.DuckDBPyConnection, str], object]]] = {}
    for mech in duckdp.algorithms():
        budget = {"epsilon": 1.0} if "epsilon/delta" in mech["budgets"] else {"rho": 0.1}
        extra = {"allow_unproven": True} if mech["unproven"] else {}

        def run(con, table, algo=mech["name"], budget=budget, extra=extra):
            return duckdp.select(con, table, algo=algo, delta=1e-5, max_contributions=2, seed=SEED, **budget, **extra)
        out[mech["name"]] = (False, run)
    out["count_release"] = (False, lambda con, table: duckdp.count_release(con, table, rho=0.5, delta=1e-5,
                                                                          kbar=4, seed=SEED))
    out["weighted_gaussian+string_keys"] = (True, out["weighted_gaussian"][1])
    out["weighted_gaussian+passes"] = (False, out["weighted_gaussian"][1])
    out["mad2r+passes"] = (False, out["mad2r"][1])        # lazy noise's candidates in user-hash passes
    out["mad2r+string_keys"] = (True, out["mad2r"][1])    # seeded digest counters: the eager mad2r_universe.sql
    out["dpsips+global"] = (False, lambda con, table: duckdp.select(con, table, algo="dpsips", epsilon=1.0, delta=1e-5,
                                                                     max_contributions=2, seed=SEED,
                                                                     truncation="global"))
    for algo in ("dpsips", "mad2r", "adaptive_sips"):
        out[f"{algo}+key_ids"] = (True, out[algo][1])
    return out


def _unseeded(init: Callable) -> Callable:
    """Randomness.__init__ that keeps the seed's key but marks the run unseeded (the key-id path)."""
    def patched(self: Randomness, seed: int | None = None) -> None:
        init(self, seed)
        self.seeded = False
    return patched


def render_case(name: str) -> dict[str, str]:
    """`<template>.sql` → its renderings in call order for case `name`."""
    string_keys, run = cases()[name]
    con = duckdb.connect()
    try:
        table = _table(con, "golden_input", string_keys)
        passes = (mock.patch.object(DuckDBStages, "passes_for", lambda self, rows: 2) if name.endswith("+passes")
                  else nullcontext())
        ids = (mock.patch.object(Randomness, "__init__", _unseeded(Randomness.__init__))
               if name.endswith("+key_ids") else nullcontext())
        lazy = (mock.patch.object(mad_duckdb, "LAZY_SHARE", 0.0) if name in LAZY_MAD2R else nullcontext())
        with recording() as calls, passes, ids, lazy:
            run(con, table)
    finally:
        con.close()
    by_template: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for template, sql, bound in calls:
        by_template[template].append((sql, bound))
    files = {}
    for template, renders in by_template.items():
        parts = []
        for i, (sql, bound) in enumerate(renders, 1):
            values = ", ".join(f"${k}={_value(v)}" for k, v in sorted(bound.items())) or "none"
            parts.append(f"-- rendering {i} of {len(renders)}; binds {values}\n{sql.strip()}\n")
        files[f"{template}.sql"] = "\n".join(parts)
    return files


def render_all() -> dict[str, str]:
    """Relative path → text of every golden file."""
    return {f"{case}/{file}": text for case in cases() for file, text in render_case(case).items()}


def main() -> None:
    files = render_all()
    for old in GOLDEN.iterdir():
        if old.is_dir():
            shutil.rmtree(old)
    for rel, text in files.items():
        path = GOLDEN / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} golden SQL files under {GOLDEN}")


if __name__ == "__main__":
    main()
