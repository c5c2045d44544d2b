"""Shared fixtures: connections, small deterministic tables, and leak checks."""
from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def con():
    c = duckdb.connect()
    yield c
    c.close()


def leftovers(con) -> list:
    """duckdp objects still present on `con` (temp tables, views, functions)."""
    tables = con.sql("SELECT table_name FROM duckdb_tables() "
                     "WHERE table_name LIKE '\\_duckdp\\_%' ESCAPE '\\'").fetchall()
    views = con.sql("SELECT view_name FROM duckdb_views() WHERE view_name LIKE '\\_duckdp\\_%' ESCAPE '\\'").fetchall()
    funcs = con.sql("SELECT DISTINCT function_name FROM duckdb_functions() "
                    "WHERE function_name LIKE 'duckdp\\_%' ESCAPE '\\'").fetchall()
    return tables + views + funcs


def random_sets(n_users: int, pool: int, max_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(users, items) arrays: each user holds 1..max_size distinct items from a Zipf-ish pool."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, pool + 1) ** 0.8
    p /= p.sum()
    users, items = [], []
    for u in range(n_users):
        k = int(rng.integers(1, max_size + 1))
        chosen = rng.choice(pool, size=k, replace=False, p=p)
        users += [u] * k
        items += chosen.tolist()
    return np.array(users, dtype=np.int64), np.array(items, dtype=np.int64)


def make_table(con, name: str, users, items, item_prefix: str = "i") -> None:
    import pyarrow as pa

    tbl = pa.table({"user_id": pa.array(users, pa.int64()),
                    "item": pa.array([f"{item_prefix}{i}" for i in items], pa.string())})
    con.register("_fixture_src", tbl)
    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _fixture_src')
    con.unregister("_fixture_src")


def halve_thresholds(monkeypatch, algo: str) -> None:
    """Break `algo` on purpose (every round's threshold halved) to prove an audit has power."""
    from duckdp.mechanisms import get

    mech = get(algo)
    original = type(mech).plan

    def halved(self, *args):
        plans = original(self, *args)
        for p in plans:
            p.threshold /= 2
        return plans
    monkeypatch.setattr(type(mech), "plan", halved)
