"""Key ids (duckdp/counters.py, "Key ids"): unseeded multi-round mechanisms run string and composite keys
on one injective UBIGINT id per key and map the released ids back in the output stage.

Pinned here: the ids are injective over the keys of the run (unicode look-alikes, keys that differ in one
column, composite keys whose DuckDB hash collides: rowid ids then), the truncation order is the same
whichever ids the keys got, and the output equals the key path's in rows, order and dtypes.
"""
from __future__ import annotations

from unittest import mock

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from conftest import leftovers
from test_noise import _collide_many

import duckdp
from duckdp import aggregate_noise
from duckdp.lifecycle import open_run
from duckdp.rng import Randomness
from duckdp.stages import duckdb as duckdb_stages
from duckdp.stages.duckdb import DuckDBStages
from duckdp.templates import Template

ALGOS = ["dpsips", "mad", "mad2r", "adaptive_sips"]
# Keys that must stay apart: NFC vs NFD 'é', a trailing space, case, the empty string, and (for two
# VARCHAR columns) splits of the same concatenation.
LOOKALIKES = ["caf\u00e9", "cafe\u0301", "a", "a ", "A", "", "x\u200b", "x"]


def _table(con: duckdb.DuckDBPyConnection, kind: str) -> list[str]:
    """Table `t`: 8 popular keys (30 users each) and one rare key per user (each user holds 4 keys, so
    with Δ0 = 50 nothing is truncated and, at a huge budget, exactly the popular keys are released)."""
    if kind == "varchar":
        popular = [(k,) for k in LOOKALIKES]
        rare = [(f"rare{u}",) for u in range(60)]
        types, cols = ["VARCHAR"], ["item"]
    elif kind == "composite":          # VARCHAR + INTEGER, keys differing in one column only
        popular = [("ab", 1), ("ab", 2), ("a", 12), ("a", 1), ("b", 1), ("ab", -1), ("\u00e9", 0), ("e\u0301", 0)]
        rare = [(f"r{u}", u) for u in range(60)]
        types, cols = ["VARCHAR", "INTEGER"], ["item", "part"]
    elif kind == "two_varchar":        # ("ab", "c") vs ("a", "bc"): one concatenation, two keys
        popular = [("ab", "c"), ("a", "bc"), ("abc", ""), ("", "abc"), ("a", "b"), ("b", "a"), ("x", "y"), ("xy", "")]
        rare = [(f"r{u}", "") for u in range(60)]
        types, cols = ["VARCHAR", "VARCHAR"], ["item", "part"]
    else:                              # DOUBLE: not `hashable`, ids are rowids through the dictionary join
        popular = [(0.5 + i,) for i in range(8)]
        rare = [(1000.25 + u,) for u in range(60)]
        types, cols = ["DOUBLE"], ["item"]
    rows = []
    for u in range(60):
        mine = [popular[(u + j) % 8] for j in range(3)] + [rare[u]]
        rows += [(u, *k) for k in mine] + [(u, *mine[0])]          # a duplicate row: pairs are distinct
    arrow = {"VARCHAR": pa.string(), "INTEGER": pa.int32(), "DOUBLE": pa.float64()}
    schema = pa.schema([("user_id", pa.int64())] + [(c, arrow[t]) for c, t in zip(cols, types, strict=True)])
    data = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    con.register("_src", data)
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM _src")
    con.unregister("_src")
    return cols


def _select(con, algo: str, cols: list[str], seed: int | None) -> tuple[pa.Table, set[str]]:
    """The release's key table and the names of the templates it rendered."""
    rendered: set[str] = set()
    render = Template.render

    def spy(self: Template, idents: dict, params: dict) -> tuple[str, dict]:
        rendered.add(self.name)
        return render(self, idents, params)

    with mock.patch.object(Template, "render", spy):
        out = duckdp.select(con, "t", algo=algo, rho=1e8, delta=1e-5, max_contributions=50,
                            item_col=cols[0] if len(cols) == 1 else cols, seed=seed).to_arrow()
    return out, rendered


@pytest.mark.parametrize("kind", ["varchar", "composite", "two_varchar", "double"])
@pytest.mark.parametrize("algo", ALGOS)
def test_output_on_ids_equals_the_key_path(con, algo, kind):
    cols = _table(con, kind)
    on_ids, rendered = _select(con, algo, cols, None)
    on_keys, rendered_keys = _select(con, algo, cols, 3)        # seeded: the key columns (digest counters)
    assert "stage_pairs_ids" in rendered and "stage_output_ids" in rendered
    assert "stage_pairs_ids" not in rendered_keys
    assert on_ids.num_rows == 8                                  # exactly the popular keys
    assert on_ids.schema == on_keys.schema                       # names and dtypes
    assert on_ids.equals(on_keys)                                # the same rows in the same order
    assert leftovers(con) == []


def _encoded(con, cols: list[str]) -> tuple[list[tuple], list[tuple], bool]:
    """(id, key…) rows of the run's dictionary, the (user, key…) pairs decoded through it, and whether
    the ids are rowids."""
    with open_run(con, "t", "user_id", cols if len(cols) > 1 else cols[0], Randomness(None)) as stages:
        pairs = stages.store(stages.round_pairs(), "pairs")
        ctx = stages.ctx
        keys = ", ".join(f"d._dp_k{i}" for i in range(len(cols)))
        dictionary = ctx.con.sql(f"SELECT _dp_id, * EXCLUDE (_dp_id) FROM {ctx.key_ids}").fetchall()
        decoded = ctx.con.sql(f"SELECT p._dp_user, {keys} FROM {stages.table_name(pairs)} AS p "
                              f"JOIN {ctx.key_ids} AS d ON p._dp_k0 = d._dp_id").fetchall()
        return dictionary, decoded, ctx.ids_joined


@pytest.mark.parametrize("kind", ["varchar", "composite", "two_varchar", "double"])
def test_ids_are_injective_and_decode_to_the_pairs(con, kind):
    cols = _table(con, kind)
    dictionary, decoded, joined = _encoded(con, cols)
    assert joined == (kind == "double")
    ids = [row[0] for row in dictionary]
    keys = {row[1:] for row in dictionary}
    assert len(set(ids)) == len(ids) == len(keys) == 68                       # 8 popular + 60 rare keys
    want = con.sql(f"SELECT DISTINCT user_id, {', '.join(cols)} FROM t").fetchall()
    assert sorted(decoded) == sorted(want)


def _colliding_table(con) -> None:
    """Composite integer keys A_j = (2j, 10⁶+j), held alone by 5 users each, and B_j = (2j+1, b_j) with the
    same DuckDB hash (test_noise), held by one user together with a filler key (−1−j, 0)."""
    rows = []
    for j, b in enumerate(_collide_many(con, 20)):
        rows += [(10 * j + u, 2 * j, 10**6 + j) for u in range(5)]
        rows += [(10 * j + 5, 2 * j + 1, b), (10 * j + 5, -1 - j, 0)]
    users, k0, k1 = zip(*rows, strict=True)
    con.register("_src", pa.table({"user_id": users, "k0": k0, "k1": k1}))
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM _src")
    con.unregister("_src")


def _hash_groups(con, dictionary: list[tuple]) -> dict:
    """The dictionary's (key, id) rows grouped by the key's DuckDB hash."""
    hashes = dict(con.sql("SELECT (k0, k1), hash(k0, k1) FROM (SELECT DISTINCT k0, k1 FROM t)").fetchall())
    groups: dict = {}
    for row in dictionary:
        groups.setdefault(hashes[tuple(row[1:3])], []).append((row[1:3], row[0]))
    return groups


@pytest.mark.parametrize("clash", [False, True])
def test_colliding_hashes_get_other_ids(con, monkeypatch, clash):
    """20 hashes shared by two keys each: only those 40 keys get other ids, numbered in (hash, key) order so that
    within each hash the ids follow the keys (stage_key_ids_shared.sql; the truncation's tie-break on the id is
    one on the key); every other key keeps its hash. Where a hash is one of those small ids (`ids_clash`, forced
    here), every key is numbered instead: rowids, the shared keys after them (stage_key_ids_numbered.sql)."""
    _colliding_table(con)
    (collided,), = con.sql("SELECT count(*) - count(DISTINCT hash(k0, k1)) FROM (SELECT DISTINCT k0, k1 FROM t)"
                           ).fetchall()
    assert collided == 20
    if clash:
        monkeypatch.setattr(duckdb_stages, "ids_clash", lambda ctx, dictionary, shared: True)
    dictionary, decoded, joined = _encoded(con, ["k0", "k1"])
    assert joined and len({row[0] for row in dictionary}) == len(dictionary) == 60
    assert sorted(decoded) == sorted(con.sql("SELECT DISTINCT user_id, k0, k1 FROM t").fetchall())
    groups = _hash_groups(con, dictionary)
    shared = [g for g in groups.values() if len(g) > 1]
    assert len(shared) == 20 and all(len(g) == 2 for g in shared)
    assert sorted(i for g in shared for _, i in g) == list(range(61, 101) if clash else range(1, 41))
    assert all([i for _, i in sorted(g)] == sorted(i for _, i in g) for g in shared)
    alone = [(h, i) for h, g in groups.items() if len(g) == 1 for _, i in g]
    assert all(i < 60 for _, i in alone) if clash else all(i == h for h, i in alone)
    assert leftovers(con) == []


def test_ids_clash_sees_a_hash_among_the_small_ids(con):
    """`ids_clash` is what keeps the shared keys' ids 1…|shared| apart from every hash id: it must see a
    dictionary id inside that range (and only there)."""
    con.execute("CREATE TABLE t AS SELECT 1 AS user_id, 'a' AS item")
    con.execute("CREATE TEMP TABLE dict AS FROM (VALUES (5::UBIGINT), (1::UBIGINT << 63)) AS v(_dp_id)")
    con.execute("CREATE TEMP TABLE shared AS SELECT range::UBIGINT + 1 AS _dp_id FROM range(4)")
    with open_run(con, "t", "user_id", "item", Randomness()) as stages:
        assert not duckdb_stages.ids_clash(stages.ctx, "dict", "shared")
        con.execute("INSERT INTO shared VALUES (5)")
        assert duckdb_stages.ids_clash(stages.ctx, "dict", "shared")


def test_truncation_order_is_the_same_whichever_ids(con, monkeypatch):
    """The order hashes (user, hash of the key columns) whichever id a key got (counters.py: a fixed
    function of the pair and the salt, never of other users' data): under one salt the kept pairs agree."""
    con.execute("CREATE TABLE t AS SELECT i % 40 AS user_id, 'k' || ((i * 7919) % 997) AS item FROM range(4000) r(i)")

    def kept(ids: str) -> list[tuple]:
        monkeypatch.setattr(duckdb_stages, "ids_collide", lambda ctx, dictionary: ids != "hash")
        monkeypatch.setattr(duckdb_stages, "ids_clash", lambda ctx, dictionary, shared: ids == "rowid")
        with open_run(con, "t", "user_id", "item", Randomness(None)) as stages:
            assert stages.ctx.key_ids is None
            monkeypatch.setattr(stages.ctx.randomness, "salt", lambda: 12345)
            pairs = stages.round_pairs()
            assert (stages.ctx.ids_joined, stages.ctx.shared_ids is not None) == (ids != "hash", ids == "shared")
            frame = stages.truncate(stages.sized(pairs), 7)
            dictionary = stages.ctx.key_ids
            return stages.ctx.con.sql(f"SELECT t._dp_user, d._dp_k0 FROM ({frame.sql}) AS t JOIN {dictionary} AS d "
                                      "ON t._dp_k0 = d._dp_id", params=frame.params).fetchall()

    by_hash = kept("hash")
    assert len(by_hash) == 40 * 7
    assert sorted(by_hash) == sorted(kept("shared")) == sorted(kept("rowid"))


def test_aggregate_after_a_selection_on_ids(con):
    """aggregate's stages read the input's key columns again after its selection ran on key ids."""
    cols = _table(con, "composite")
    out = duckdp.aggregate(con, "t", by=cols, metrics={"n": "users"}, keys="dpsips", rho=1e8, delta=1e-5,
                           max_contributions=50).to_arrow()
    assert out.num_rows == 8 and out.column_names[:2] == cols
    assert leftovers(con) == []


def test_seeded_runs_keep_the_key_columns(con):
    _table(con, "varchar")
    with open_run(con, "t", "user_id", "item", Randomness(5)) as stages:
        stages.round_pairs()
        assert stages.ctx.key_ids is None and isinstance(stages, DuckDBStages)


@pytest.mark.parametrize("keys", ["threshold", "dpsips"])
def test_aggregate_counters_unseeded_are_positions(con, monkeypatch, keys):
    """Unseeded aggregate on string keys: each key's counter is its position in the key-sorted list
    (0, 1, …: injective, no digest); seeded calls keep the MD5 digest (reproducible, pinned)."""
    cols = _table(con, "varchar")
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    noise = aggregate_noise.noise

    def spy(randomness, tag, hi, lo, sigma, ranks=None):
        seen.append((hi.copy(), lo.copy()))
        return noise(randomness, tag, hi, lo, sigma, ranks)

    monkeypatch.setattr(aggregate_noise, "noise", spy)
    metrics = {"n": "users", "rows": "count"}
    duckdp.aggregate(con, "t", by=cols[0], metrics=metrics, keys=keys, rho=1.0, delta=1e-5, max_contributions=50)
    assert seen and all((hi == 0).all() and (lo == np.arange(lo.size)).all() for hi, lo in seen)
    seen.clear()
    duckdp.aggregate(con, "t", by=cols[0], metrics=metrics, keys=keys, rho=1.0, delta=1e-5, max_contributions=50,
                     seed=4)
    drawn = [(hi, lo) for hi, lo in seen if lo.size]
    assert drawn and all(len(set(zip(hi.tolist(), lo.tolist(), strict=True))) == lo.size and (lo > lo.size).any()
                         for hi, lo in drawn)
