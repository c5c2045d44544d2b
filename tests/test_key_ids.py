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
from duckdp import aggregate_noise, counters
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


def _ids_kind(ctx) -> str:
    """How a run's keys got their ids (DuckDBStages.round_pairs): "hash", "lookup" (keys that share a hash take
    their second candidate, whose hash the order looks up), "carried" (the same, the pairs carry the hash) or
    "rowid"."""
    if ctx.shared_ids is None:
        return "rowid" if ctx.pairs_carry_hash else "hash"
    return "carried" if ctx.pairs_carry_hash else "lookup"


def _force(monkeypatch, ids: str) -> None:
    """Make a run with keys that share a hash take the `ids` kind: "carried" with no lookup list allowed,
    "rowid" with every second candidate declared clashing."""
    monkeypatch.setattr(duckdb_stages, "ids_clash", lambda ctx, dictionary, shared: ids == "rowid")
    if ids == "carried":
        monkeypatch.setattr(duckdb_stages, "SHARED_LOOKUP", -1)


def _encoded(con, cols: list[str]) -> tuple[list[tuple], list[tuple], str]:
    """(id, key…) rows of the run's dictionary, the (user, key…) pairs decoded through it, and `_ids_kind`."""
    with open_run(con, "t", "user_id", cols if len(cols) > 1 else cols[0], Randomness(None)) as stages:
        pairs = stages.store(stages.round_pairs(), "pairs")
        ctx = stages.ctx
        keys = ", ".join(f"d._dp_k{i}" for i in range(len(cols)))
        dictionary = ctx.con.sql(f"SELECT _dp_id, * EXCLUDE (_dp_id) FROM {ctx.key_ids}").fetchall()
        decoded = ctx.con.sql(f"SELECT p._dp_user, {keys} FROM {stages.table_name(pairs)} AS p "
                              f"JOIN {ctx.key_ids} AS d ON p._dp_k0 = d._dp_id").fetchall()
        return dictionary, decoded, _ids_kind(ctx)


@pytest.mark.parametrize("kind", ["varchar", "composite", "two_varchar", "double"])
def test_ids_are_injective_and_decode_to_the_pairs(con, kind):
    cols = _table(con, kind)
    dictionary, decoded, ids = _encoded(con, cols)
    assert ids == ("rowid" if kind == "double" else "hash")
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


@pytest.mark.parametrize("ids", ["lookup", "carried", "rowid"])
def test_colliding_hashes_get_other_ids(con, monkeypatch, ids):
    """20 hashes shared by two keys each: only those 40 keys get other ids, their second candidates
    (counters.second_id_sql, a function of the key alone), computed by each pair from its key; every other key
    keeps its hash. Where the candidates clash (`ids_clash`, forced here), every key is numbered instead:
    rowids, the shared keys after them in (hash, second candidate, key) order (stage_key_ids_numbered.sql), so
    within a hash the ids follow the second candidates either way (the truncation's tie-break on the id)."""
    _colliding_table(con)
    (collided,), = con.sql("SELECT count(*) - count(DISTINCT hash(k0, k1)) FROM (SELECT DISTINCT k0, k1 FROM t)"
                           ).fetchall()
    assert collided == 20
    _force(monkeypatch, ids)
    dictionary, decoded, kind = _encoded(con, ["k0", "k1"])
    assert kind == ids and len({row[0] for row in dictionary}) == len(dictionary) == 60
    assert sorted(decoded) == sorted(con.sql("SELECT DISTINCT user_id, k0, k1 FROM t").fetchall())
    second = counters.second_id_sql(["INTEGER", "INTEGER"])
    seconds = dict(con.sql(f"SELECT (_dp_k0, _dp_k1), {second} FROM (SELECT DISTINCT k0 AS _dp_k0, k1 AS _dp_k1 "
                           "FROM t)").fetchall())
    groups = _hash_groups(con, dictionary)
    shared = [g for g in groups.values() if len(g) > 1]
    assert len(shared) == 20 and all(len(g) == 2 for g in shared)
    if ids == "rowid":
        assert sorted(i for g in shared for _, i in g) == list(range(61, 101))
    else:
        assert all(i == seconds[k] for g in shared for k, i in g)
    assert all([i for _, i in sorted(g, key=lambda ki: (seconds[ki[0]], ki[0]))] == sorted(i for _, i in g)
               for g in shared)
    alone = [(h, i) for h, g in groups.items() if len(g) == 1 for _, i in g]
    assert all(i < 60 for _, i in alone) if ids == "rowid" else all(i == h for h, i in alone)
    assert leftovers(con) == []


@pytest.mark.parametrize("clash", ["none", "a key's hash", "two candidates"])
def test_ids_clash_sees_candidates_that_are_not_injective(con, clash):
    """`ids_clash` is what keeps the shared keys' second candidates apart from each other and from every hash id
    (the dictionary's): it must see a candidate equal to a dictionary id, or two equal candidates."""
    con.execute("CREATE TABLE t AS SELECT 1 AS user_id, 'a' AS item")
    con.execute("CREATE TEMP TABLE dict AS FROM (VALUES (5::UBIGINT), (1::UBIGINT << 63)) AS v(_dp_id)")
    con.execute("CREATE TEMP TABLE shared AS SELECT range::UBIGINT + 10 AS _dp_id FROM range(4)")
    con.execute({"none": "DELETE FROM shared WHERE false", "a key's hash": "INSERT INTO shared VALUES (5)",
                 "two candidates": "INSERT INTO shared VALUES (11)"}[clash])
    with open_run(con, "t", "user_id", "item", Randomness()) as stages:
        assert duckdb_stages.ids_clash(stages.ctx, "dict", "shared") == (clash != "none")


@pytest.mark.parametrize("ids", ["lookup", "carried", "rowid"])
@pytest.mark.parametrize("algo", ALGOS)
def test_colliding_hashes_release_as_the_key_path(con, algo, monkeypatch, ids):
    """At a huge budget exactly the A_j are released (weight 5 ≫ T; B_j and the fillers ≈ 1/√2 < T),
    on ids (`_ids_kind`) as on the key columns. Without the collision check (deliberately broken) A_j and
    B_j share an id and B_j, held by one user, would be released with A_j: the check has power."""
    _colliding_table(con)
    _force(monkeypatch, ids)

    def run(seed: int | None) -> pa.Table:
        return duckdp.select(con, "t", algo=algo, rho=1e8, delta=1e-5, max_contributions=50,
                             item_col=["k0", "k1"], seed=seed).to_arrow()

    want = run(3)
    assert want.num_rows == 20
    assert run(None).equals(want)
    monkeypatch.setattr(duckdb_stages, "ids_collide", lambda ctx, dictionary: False)
    assert run(None).num_rows == 40


@pytest.mark.parametrize("table", ["varchar", "colliding"])
def test_truncation_order_is_the_same_whichever_ids(con, monkeypatch, table):
    """The order hashes (user, hash of the key columns) whichever id a key got (counters.py: a fixed function of
    the pair and the salt, never of other users' data), and breaks ties between keys of one hash on a function
    of the keys: under one salt the kept pairs agree for every kind of id. "varchar": no hash shared (forced
    kinds look up nothing); "colliding": composite keys with 29 hashes for 64 keys, so the order's lookup and
    its tie-break both decide which pairs are kept."""
    if table == "varchar":
        con.execute("CREATE TABLE t AS SELECT i % 40 AS user_id, 'k' || ((i * 7919) % 997) AS item "
                    "FROM range(4000) r(i)")
        cols, kinds = ["item"], ["hash", "lookup", "carried", "rowid"]
    else:          # tests/test_stages.py TIE_KEYS["composite"]: users of 0–63 of the 64 keys
        con.execute("CREATE TABLE t AS SELECT u % 40 AS user_id, 'g' || (k % 3) AS tag, "
                    "((1 + k // 8)::HUGEINT << 64) + (1 + k % 8) AS item FROM range(300) AS a(u), range(64) AS b(k) "
                    "WHERE hash(u, k, 17) % 64 < u % 64")
        cols, kinds = ["tag", "item"], ["lookup", "carried", "rowid"]
    keys = ", ".join(f"d._dp_k{i}" for i in range(len(cols)))
    collide = duckdb_stages.ids_collide

    def kept(ids: str) -> list[tuple]:
        if table == "varchar":
            monkeypatch.setattr(duckdb_stages, "ids_collide", lambda ctx, dictionary: ids != "hash")
        else:
            monkeypatch.setattr(duckdb_stages, "ids_collide", collide)
        _force(monkeypatch, ids)
        with open_run(con, "t", "user_id", cols if len(cols) > 1 else cols[0], Randomness(None)) as stages:
            assert stages.ctx.key_ids is None
            monkeypatch.setattr(stages.ctx.randomness, "salt", lambda: 12345)
            pairs = stages.round_pairs()
            assert _ids_kind(stages.ctx) == ids
            frame = stages.truncate(stages.sized(pairs), 7)
            dictionary = stages.ctx.key_ids
            return sorted(stages.ctx.con.sql(f"SELECT t._dp_user, {keys} FROM ({frame.sql}) AS t JOIN {dictionary} "
                                             "AS d ON t._dp_k0 = d._dp_id", params=frame.params).fetchall(), key=repr)

    first = kept(kinds[0])
    assert len(first) == 40 * 7 if table == "varchar" else len(first) > 40 * 7 // 2
    assert all(kept(ids) == first for ids in kinds[1:])


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
    """Unseeded aggregate on string keys: each key's counter is its position (0, 1, …: injective, no digest) in
    the key-sorted key set (dpsips) or in the candidates' stream (keys="threshold", the engine's order: the kept
    keys, sorted by key, keep theirs); seeded calls keep the MD5 digest (reproducible, pinned)."""
    cols = _table(con, "varchar")
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    noise = aggregate_noise.noise

    def spy(randomness, tag, hi, lo, sigma, ranks=None, pool=None, floors=None):
        seen.append((hi.copy(), lo.copy()))
        return noise(randomness, tag, hi, lo, sigma, ranks, pool, floors)

    monkeypatch.setattr(aggregate_noise, "noise", spy)
    metrics = {"n": "users", "rows": "count"}
    duckdp.aggregate(con, "t", by=cols[0], metrics=metrics, keys=keys, rho=1.0, delta=1e-5, max_contributions=50)
    los = [lo.tolist() for hi, lo in seen if lo.size]
    assert los and all((hi == 0).all() for hi, _ in seen) and all(len(set(lo)) == len(lo) for lo in los)
    assert set().union(*los) == set(range(max(map(max, los)) + 1))       # positions 0, 1, … over the calls
    seen.clear()
    duckdp.aggregate(con, "t", by=cols[0], metrics=metrics, keys=keys, rho=1.0, delta=1e-5, max_contributions=50,
                     seed=4)
    drawn = [(hi, lo) for hi, lo in seen if lo.size]
    assert drawn and all(len(set(zip(hi.tolist(), lo.tolist(), strict=True))) == lo.size and (lo > lo.size).any()
                         for hi, lo in drawn)
