"""Released keys are listed in key order: a function of the released set only (issue 18 §1).

DuckDB's hash aggregates and joins emit groups in an order that depends on every key present, on
input order and on thread scheduling. The neighbour construction: D = 400 users each holding keys A
and B; D' = D plus one user holding B and 50 keys nobody else holds (that user's rows first). Both
release exactly {A, B}; before the fix, "B listed before A" told D' from D on nearly every seed
(DP-SIPS, MAD, adaptive SIPS). Every mechanism family and count release must now list the same
keys identically on both sides, sorted, in one Arrow chunk, whatever the connection's settings.
"""
from __future__ import annotations

import struct

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import duckdp
from duckdp.errors import InvalidParameter

FAMILIES = [                                        # (algo, budget): one per mechanism family
    ("weighted_gaussian", {"epsilon": 1.0, "delta": 1e-5}),
    ("count_laplace", {"epsilon": 1.0, "delta": 1e-5}),
    ("dpsips", {"epsilon": 1.0, "delta": 1e-5}),
    ("adaptive_sips", {"epsilon": 1.0, "delta": 1e-5}),
    ("mad", {"epsilon": 1.0, "delta": 1e-5}),
    ("mad2r", {"epsilon": 1.0, "delta": 1e-5}),
    ("policy_gaussian", {"epsilon": 1.0, "delta": 1e-5}),
    ("truncated_geometric", {"epsilon": 1.0, "delta": 1e-5}),
    ("pcr", {"rho": 0.5, "delta": 1e-5}),
]


def neighbours(shared: tuple[str, str] = ("A", "B"), extra_holds: str = "B") -> tuple[pa.Table, pa.Table]:
    """(D, D'): 400 users holding both `shared` keys; D' adds one user (rows first) holding `extra_holds`
    and 50 keys nobody else holds."""
    users = np.repeat(np.arange(400, dtype=np.int64), 2)
    items = list(shared) * 400
    d = pa.table({"user_id": users, "item": pa.array(items)})
    extra = pa.table({"user_id": np.full(51, 10**6, dtype=np.int64),
                      "item": pa.array([extra_holds] + [f"x{i:02d}" for i in range(50)])})
    return d, pa.concat_tables([extra, d])


def release(con, table, algo: str, budget: dict, seed: int):
    if algo == "pcr":
        return duckdp.count_release(con, table, seed=seed, initial_epsilon=0.5, **budget)
    return duckdp.select(con, table, algo=algo, max_contributions=4, seed=seed, **budget)


def listing(r) -> tuple[list, pa.Table]:
    keys = [row[0] for row in r.items.fetchall()]
    assert keys == sorted(keys), f"{r.algo}: released keys not in key order: {keys}"
    table = r.to_arrow()
    assert table.column(0).to_pylist() == keys and table.column(0).num_chunks == 1
    return keys, table


def check_neighbours(algo: str, budget: dict, seeds, threads: int, shared=("A", "B"), extra_holds="B") -> int:
    """Run D and D' under each seed; same released set ⇒ identical listing. Returns the seeds where
    both released exactly the shared pair (the case the attack needs)."""
    d, d_prime = neighbours(shared, extra_holds)
    con = duckdb.connect()
    con.execute(f"SET threads={threads}")
    both = 0
    for seed in seeds:
        (keys, table), (keys2, table2) = listing(release(con, d, algo, budget, seed)), \
            listing(release(con, d_prime, algo, budget, seed))
        if set(keys) == set(keys2):
            assert keys == keys2
            if algo != "pcr":                   # count release: the noisy counts differ (one more user on B)
                assert table.equals(table2)
        both += set(keys) == set(keys2) == set(shared)
    return both


@pytest.mark.parametrize("algo,budget", FAMILIES, ids=[f[0] for f in FAMILIES])
@pytest.mark.parametrize("threads", [1, 2])
def test_neighbours_list_released_keys_identically(algo, budget, threads):
    assert check_neighbours(algo, budget, range(3), threads) >= 1          # the attack's case did occur
    check_neighbours(algo, budget, range(1), threads, shared=("B", "A"), extra_holds="A")


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["dpsips", "weighted_gaussian", "adaptive_sips", "mad", "pcr"])
def test_neighbours_statistical(algo):
    """The issue's trial: 150 seeds per side at threads=2 (before: B first 0/150 on D, 142/150 on D')."""
    budget = dict(FAMILIES)[algo]
    assert check_neighbours(algo, budget, range(150), threads=2) >= 100


def test_composite_and_struct_keys_sorted(con):
    """Composite keys (VARCHAR, INTEGER) and a STRUCT key come out in DuckDB's ORDER BY ALL order."""
    rng = np.random.default_rng(3)
    n_keys, holders = 300, 30
    key = rng.permutation(np.repeat(np.arange(n_keys), holders))
    users = np.arange(key.size, dtype=np.int64)
    table = pa.table({"user_id": users, "word": pa.array([f"w{k % 7}" for k in key]),
                      "n": pa.array((key // 7).astype(np.int32))})
    r = duckdp.select(con, table, algo="weighted_gaussian", epsilon=1.0, delta=1e-5, max_contributions=1,
                      item_col=["word", "n"], seed=1)
    got = r.to_arrow()
    assert got.num_rows == n_keys
    con.register("got", got)
    assert got.equals(con.sql("SELECT * FROM got ORDER BY ALL").to_arrow_table().combine_chunks())
    assert r.items.fetchall() == con.sql("SELECT * FROM got ORDER BY ALL").fetchall()
    con.register("src", table)
    s = duckdp.select(con, con.sql("SELECT user_id, {'w': word, 'n': n} AS item FROM src"),
                      algo="dpsips", epsilon=1.0, delta=1e-5, max_contributions=1, seed=1).to_arrow()
    con.register("s", s)
    assert s.num_rows > n_keys // 2 and s.equals(con.sql("SELECT * FROM s ORDER BY ALL").to_arrow_table()
                                             .combine_chunks())


@pytest.mark.slow
def test_items_ordered_without_insertion_order(con):
    """`SET preserve_insertion_order=false` lets DuckDB scan an Arrow table of 10⁶ rows out of order;
    `items` keeps key order anyway (and `to_arrow()` is one chunk, not the engine's batches)."""
    con.execute("SET preserve_insertion_order=false; SET threads=2")
    n = 1_100_000
    k = np.random.default_rng(0).permutation(n)
    table = pa.table({"user_id": np.arange(2 * n, dtype=np.int64), "item": np.concatenate([k, k])})
    r = duckdp.select(con, table, algo="count_laplace", epsilon=1000.0, delta=1e-5, max_contributions=1, seed=1)
    assert len(r) == n
    for _ in range(3):
        assert (np.diff(r.items.fetchnumpy()["item"]) > 0).all()
    assert r.to_arrow().column(0).num_chunks == 1 and (np.diff(r.to_arrow().column(0).to_numpy()) > 0).all()


def test_by_key_orders_a_many_chunk_table(con):
    """What keeps `items` in key order under `preserve_insertion_order=false` (the fast check)."""
    from duckdp.release import by_key

    con.execute("SET preserve_insertion_order=false; SET threads=2")
    t = pa.Table.from_batches(pa.table({"k": np.arange(2_000_000)}).to_batches(max_chunksize=100_000))
    assert (np.diff(by_key(con, t, ["k"]).fetchnumpy()["k"]) > 0).all()


def test_count_release_ledger_points_at_sorted_rows(con):
    """Count release lists keys by key; each Gaussian step's `item` is the row of its key in `items`."""
    rng = np.random.default_rng(5)
    sizes = rng.integers(200, 2000, size=12)
    items = np.repeat([f"k{i:02d}" for i in rng.permutation(12)], sizes)
    table = pa.table({"user_id": np.arange(items.size, dtype=np.int64), "item": items})
    r = duckdp.count_release(con, table, rho=1.0, delta=1e-5, seed=2, initial_epsilon=0.5, kbar=20)
    out = r.to_arrow().to_pydict()
    assert len(out["item"]) >= 5 and out["item"] == sorted(out["item"])
    true = dict(zip(*np.unique(items, return_counts=True), strict=True))
    led = r.ledger.to_pydict()
    for i, mech in enumerate(led["mechanism"]):
        if mech == "gaussian":
            row = led["item"][i]
            assert abs(out["noisy_count"][row] - true[out["item"][row]]) < 8 * out["sigma"][row]
            assert led["item"][i - 1] == row


@pytest.mark.parametrize("as_key", [lambda i: f"k{i:03d}", lambda i: [i, 1]], ids=["varchar", "list"])
def test_cli_output_file_sorted(tmp_path, as_key):
    """The CLI writes `to_arrow()`: 100 keys held by 60 users each (rows shuffled), and a neighbour with one
    more user holding key 50 and 50 keys of its own; both files list the same keys identically, sorted.
    LIST keys too (the CLI's former pyarrow sort refused them)."""
    from duckdp.cli import main

    keys = np.random.default_rng(7).permutation(np.repeat(np.arange(100), 60))
    d = pa.table({"user_id": np.arange(keys.size, dtype=np.int64), "item": [as_key(int(k)) for k in keys]})
    extra = pa.table({"user_id": np.full(51, -1, dtype=np.int64),
                      "item": [as_key(50)] + [as_key(1000 + i) for i in range(50)]})
    files = []
    for name, table in (("d", d), ("d_prime", pa.concat_tables([extra, d]))):
        src, out = tmp_path / f"{name}.parquet", tmp_path / f"{name}_out.parquet"
        pq.write_table(table, src)
        assert main(["select", str(src), "--algo", "weighted_gaussian", "--epsilon", "1", "--delta", "1e-5",
                     "--max-contributions", "1", "--seed", "1", "-o", str(out)]) == 0
        files.append(pq.read_table(out))
    listed = files[0].column("item").to_pylist()
    assert listed == [as_key(i) for i in range(100)] and files[0].equals(files[1])


_NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8_0000_0000_0001))[0]     # a NaN of another sign and payload
_CANONICAL = {"zero": struct.pack("<d", 0.0), "nan": struct.pack("<d", float("nan"))}


def _float_neighbours() -> tuple[pa.Table, pa.Table]:
    """(D, D'): 400 users holding the DOUBLE keys 0.0, NaN and 1.0; D' adds one user, rows first, holding −0.0 and
    a NaN of another bit pattern — the same keys to GROUP BY (−0.0 = 0.0, one NaN), so both release {0.0, NaN,
    1.0}. Before keys were canonical (source.canonical_key) each group showed its first row's form: D' released −0.0
    and the other NaN, telling the extra user's presence from the released keys alone, on every seed."""
    d = pa.table({"user_id": np.repeat(np.arange(400, dtype=np.int64), 3),
                  "item": pa.array([0.0, float("nan"), 1.0] * 400), "v": pa.array([1.0] * 1200)})
    extra = pa.table({"user_id": np.full(2, 10**6, dtype=np.int64), "item": pa.array([-0.0, _NEG_NAN]),
                      "v": pa.array([1.0, 1.0])})
    return d, pa.concat_tables([extra, d])


def _forms(table: pa.Table) -> list[bytes]:
    return [struct.pack("<d", x) for x in table.column("item").to_pylist()]


@pytest.mark.parametrize("how", ["select", "count_release", "aggregate", "public"])
def test_float_keys_released_in_one_form_whatever_row_came_first(how):
    """The neighbour pair above: every released zero is +0.0 and every NaN the one NaN, on D and D', for select,
    count release, aggregate with a selection and with a public key set given in both forms (which the engine's
    GROUP BY merges: one key, once — it was an internal error)."""
    con = duckdb.connect()
    budget = {"epsilon": 5.0, "delta": 1e-6}
    for table in _float_neighbours():
        for seed in range(2):
            if how == "select":
                out = duckdp.select(con, table, algo="weighted_gaussian", seed=seed, **budget).to_arrow()
            elif how == "count_release":
                out = duckdp.count_release(con, table, seed=seed, initial_epsilon=0.5, rho=0.5, delta=1e-6).to_arrow()
            else:
                keys = [0.0, -0.0, float("nan"), _NEG_NAN, 1.0] if how == "public" else "weighted_gaussian"
                out = duckdp.aggregate(con, table, by="item", metrics={"n": "users"}, keys=keys, seed=seed,
                                       **budget).to_arrow()
            forms = _forms(out)
            assert set(forms) <= {_CANONICAL["zero"], _CANONICAL["nan"], struct.pack("<d", 1.0)}, forms
            assert len(forms) == len(set(forms))
            if how == "public":
                assert len(forms) == 3


def test_string_keys_grouped_byte_by_byte_whatever_the_collation():
    """A neighbour pair under a NOCASE column: D = 400 users holding 'a'; D' adds one user, rows first, holding 'A'.
    Grouped NOCASE, both release one key, showing the first row's form — 'A' on D' on every seed, telling the extra
    user apart. Keys are compared byte by byte (source.canonical_key): D' releases 'a' (the lone 'A' too rare), as
    D does; a public key set lists 'a' and 'A'. A connection's default_collation is refused (next test)."""
    for extra in (False, True):
        con = duckdb.connect()
        con.execute("CREATE TABLE t (user_id BIGINT, item VARCHAR COLLATE NOCASE)")
        if extra:
            con.execute("INSERT INTO t VALUES (1000000, 'A')")
        con.execute("INSERT INTO t SELECT range, 'a' FROM range(400)")
        for seed in range(2):
            assert duckdp.select(con, "t", algo="weighted_gaussian", epsilon=5, delta=1e-6, seed=seed).to_arrow() \
                .column(0).to_pylist() == ["a"]
            out = duckdp.aggregate(con, "t", by="item", metrics={"n": "users"}, keys=["a", "A"], epsilon=5, delta=1e-6,
                                   seed=seed).to_arrow()
            assert out.column("item").to_pylist() == ["A", "a"]


def test_a_connections_default_collation_is_refused():
    """Under `SET default_collation = 'nocase'` every VARCHAR duckdp sorts or groups outside the input's key columns
    (a public key set, the listing) would compare 'A' and 'a' equal: refused with a clear error, before any data is
    read, for select and aggregate; RESET, the same connection runs."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS user_id, 'a' AS item FROM range(400)")
    con.execute("SET default_collation = 'nocase'")
    with pytest.raises(InvalidParameter, match="default_collation is 'nocase'"):
        duckdp.select(con, "t", algo="weighted_gaussian", epsilon=5, delta=1e-6, seed=1)
    with pytest.raises(InvalidParameter, match="default_collation"):
        duckdp.aggregate(con, "t", by="item", metrics={"n": "users"}, keys=["a", "A"], epsilon=5, delta=1e-6, seed=1)
    con.execute("RESET default_collation")
    assert duckdp.select(con, "t", algo="weighted_gaussian", epsilon=5, delta=1e-6, seed=1).to_arrow().num_rows == 1


_NESTED = [   # (type, −0.0 inside it, +0.0 inside it, the released key's zero)
    ("DOUBLE[]", "[CAST('-0.0' AS DOUBLE)]", "[0.0::DOUBLE]", lambda k: k[0]),
    ("STRUCT(a FLOAT[], \"b c\" VARCHAR)[]", "[{'a': [CAST('-0.0' AS FLOAT)], 'b c': 'x'}]",
     "[{'a': [0.0::FLOAT], 'b c': 'x'}]", lambda k: k[0]["a"][0]),
    ("DOUBLE[2]", "[1.0, CAST('-0.0' AS DOUBLE)]::DOUBLE[2]", "[1.0, 0.0]::DOUBLE[2]", lambda k: k[1]),
    ("MAP(VARCHAR, DOUBLE)", "MAP {'a': CAST('-0.0' AS DOUBLE)}", "MAP {'a': 0.0::DOUBLE}", lambda k: k["a"]),
    ("MAP(DOUBLE, INTEGER)", "MAP {CAST('-0.0' AS DOUBLE): 1}", "MAP {0.0::DOUBLE: 1}", lambda k: next(iter(k))),
    ("UNION(\"i'd\" INTEGER, f DOUBLE)", "union_value(f := CAST('-0.0' AS DOUBLE))",
     "union_value(f := 0.0::DOUBLE)", lambda k: k)]


@pytest.mark.parametrize("kind,negative,positive,zero", _NESTED, ids=[n[0] for n in _NESTED])
def test_nested_float_keys_released_in_one_form(kind, negative, positive, zero):
    """The float neighbour pair with the −0.0 inside a LIST, a LIST of STRUCTs, a fixed-size ARRAY, a MAP's value
    and key, a UNION: D = 400 users on one form, D' adds one user, rows first, on the other. A nested key showed
    whichever form its path through the engine met first (select and aggregate differ: the ARRAY, MAP and UNION
    keys leaked through aggregate only), telling D' from D; canonical_key rewrites the floats a key holds, keeping
    its type, so every release shows +0.0."""
    for base, other in ((positive, negative), (negative, positive)):
        for extra in (False, True):
            con = duckdb.connect()
            con.execute(f"CREATE TABLE t (user_id BIGINT, item {kind})")
            if extra:
                con.execute(f"INSERT INTO t VALUES (1000000, {other})")
            con.execute(f"INSERT INTO t SELECT range, {base} FROM range(400)")
            for out in (duckdp.select(con, "t", algo="weighted_gaussian", epsilon=5, delta=1e-6, seed=1).to_arrow(),
                        duckdp.aggregate(con, "t", by="item", metrics={"n": "users"}, keys="weighted_gaussian",
                                         epsilon=5, delta=1e-6, seed=1).to_arrow()):
                (key,) = out.column("item").to_pylist()
                if kind.startswith("MAP"):
                    key = dict(key)
                assert struct.pack("<d", zero(key)) == _CANONICAL["zero"], (base, extra)
                assert con.sql(f"SELECT CAST(NULL AS {kind}) AS item").to_arrow_table().schema.field(0).type == \
                    out.schema.field(0).type


@pytest.mark.parametrize("kind,negative,positive,zero", _NESTED[:3], ids=[n[0] for n in _NESTED[:3]])
def test_public_nested_keys_given_in_both_forms_are_one_key(kind, negative, positive, zero):
    """A public key set listing a nested key in both forms (+0.0 and −0.0 inside), which the engine's GROUP BY
    merges: one released key, in the canonical form (pyarrow's group_by refused LIST and STRUCT keys: an internal
    ArrowNotImplementedError)."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT range AS user_id, {positive} AS item FROM range(400)")
    public = con.sql(f"SELECT {negative} AS item UNION ALL SELECT {positive}")
    out = duckdp.aggregate(con, "t", by="item", metrics={"n": "users"}, keys=public, epsilon=5, delta=1e-6,
                           seed=1).to_arrow()
    (key,) = out.column("item").to_pylist()
    assert struct.pack("<d", zero(key)) == _CANONICAL["zero"]
    assert out.column("n").to_pylist()[0] > 300
