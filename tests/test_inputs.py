"""Bad input is refused clearly and leaves the database unchanged; every input kind works."""
import datetime
import uuid

import pyarrow as pa
import pytest
from conftest import leftovers, make_table, random_sets

import duckdp
from duckdp import DataError, InvalidParameter, SchemaError

GOOD = dict(algo="weighted_gaussian", rho=0.5, delta=1e-5, max_contributions=5, seed=1)


@pytest.fixture
def reviews(con):
    users, items = random_sets(300, 40, 5, 3)
    make_table(con, "reviews", users, items)
    return con


def fingerprint(con, table='"reviews"'):
    return con.sql(f"SELECT count(*), sum(hash(COLUMNS(*))) FROM {table}").fetchall()


def objects(con):
    return sorted(con.sql("SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() "
                          "WHERE NOT internal").fetchall())


BAD = [
    (dict(table="nope"), SchemaError, "no table or view named 'nope'"),
    (dict(user_col="uid"), SchemaError, "user_col 'uid' is not a column"),
    (dict(item_col="word"), SchemaError, "item_col 'word' is not a column"),
    (dict(item_col=["item", "nope"]), SchemaError, "item_col 'nope'"),
    (dict(item_col="user_id"), SchemaError, "distinct columns"),
    (dict(rho=0), InvalidParameter, "rho must be a finite number > 0"),
    (dict(rho=None, epsilon=-1), InvalidParameter, "epsilon must be a finite number > 0"),
    (dict(rho=None, epsilon=float("nan")), InvalidParameter, "epsilon"),
    (dict(delta=0), InvalidParameter, r"delta must be in \(0, 1\)"),
    (dict(delta=1), InvalidParameter, r"delta must be in \(0, 1\)"),
    (dict(delta=None), InvalidParameter, "delta is required"),
    (dict(epsilon=1), InvalidParameter, "exactly one of epsilon"),
    (dict(rho=None), InvalidParameter, "exactly one of epsilon"),
    (dict(max_contributions=0), InvalidParameter, "max_contributions must be an integer >= 1"),
    (dict(max_contributions=2.5), InvalidParameter, "max_contributions must be an integer >= 1"),
    (dict(max_contributions=True), InvalidParameter, "max_contributions"),
    (dict(algo="nonsense"), InvalidParameter, "unknown algo 'nonsense'"),
    (dict(algo="weighted_laplace"), InvalidParameter, "takes a budget given as epsilon="),
    (dict(iterations=3), InvalidParameter, "weighted_gaussian does not take iterations"),
    (dict(seed="x"), InvalidParameter, "seed must be an integer"),
]


@pytest.mark.parametrize("change, error, message", BAD)
def test_bad_input_is_refused_and_leaves_db_unchanged(reviews, change, error, message):
    con = reviews
    before, objs = fingerprint(con), objects(con)
    kwargs = dict(GOOD) | change
    table = kwargs.pop("table", "reviews")
    with pytest.raises(error, match=message):
        duckdp.select(con, table, **kwargs)
    assert fingerprint(con) == before and objects(con) == objs and leftovers(con) == []


@pytest.mark.parametrize("column", ["user_id", "item"])
def test_nulls_are_counted_not_dropped(con, column):
    con.execute("CREATE TABLE t AS SELECT range AS user_id, 'w' || (range % 3) AS item FROM range(20)")
    con.execute(f"UPDATE t SET {column} = NULL WHERE user_id IN (3, 4, 5)")
    before = fingerprint(con, "t")
    what = "NULL user id" if column == "user_id" else "NULL item"
    with pytest.raises(DataError, match=f"3 row\\(s\\) with a {what}"):
        duckdp.select(con, "t", **GOOD)
    assert fingerprint(con, "t") == before and leftovers(con) == []


def test_empty_table_gives_empty_release(con):
    con.execute("CREATE TABLE t (user_id BIGINT, item VARCHAR)")
    r = duckdp.select(con, "t", **GOOD)
    assert len(r) == 0 and r.to_arrow().num_rows == 0 and r.items.columns == ["item"]


def test_wrong_connection_object(reviews):
    with pytest.raises(InvalidParameter, match="con must be a duckdb connection"):
        duckdp.select("not a connection", "reviews", **GOOD)
    other = __import__("duckdb").connect()
    with pytest.raises(SchemaError, match="cannot read"):
        duckdp.select(reviews, other.sql("SELECT 1 AS user_id, 'a' AS item"), **GOOD)
    assert leftovers(reviews) == []


NASTY = ['my "table"; DROP TABLE reviews; --', "select", "Ünïcødé table", "a.b"]


@pytest.mark.parametrize("name", NASTY)
def test_adversarial_table_and_column_names(reviews, name):
    con = reviews
    q = '"' + name.replace('"', '""') + '"'
    ucol, icol = 'user "id"; --', "from"
    con.execute(f'CREATE TABLE {q} AS SELECT user_id AS "user ""id""; --", item AS "from" FROM reviews')
    before = fingerprint(con)
    r = duckdp.select(con, name, **(GOOD | dict(user_col=ucol, item_col=icol)))
    expected = duckdp.select(con, "reviews", **GOOD)
    assert sorted(r.to_arrow().column(0).to_pylist()) == sorted(expected.to_arrow().column(0).to_pylist())
    assert r.items.columns == ["from"]
    assert fingerprint(con) == before and leftovers(con) == []


def _expected_keys(con, table_sql, **kw):
    return sorted(map(tuple, duckdp.select(con, table_sql, **(GOOD | kw)).items.fetchall()))


def test_every_input_kind_gives_the_same_release(reviews, tmp_path):
    con = reviews
    want = _expected_keys(con, "reviews")
    assert want, "the fixture should release something"
    path = str(tmp_path / "r.parquet")
    con.execute(f"COPY reviews TO '{path}' (FORMAT parquet)")
    con.execute("CREATE VIEW v AS SELECT * FROM reviews")
    con.execute("CREATE TEMP TABLE tt AS SELECT * FROM reviews")
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    con.execute("CREATE TABLE other.main.ext AS SELECT * FROM reviews")
    df = con.sql("SELECT * FROM reviews").df()
    arrow = con.sql("SELECT * FROM reviews").to_arrow_table()
    for table in ("v", "tt", "other.main.ext", "ext", "REVIEWS", "main.reviews", con.read_parquet(path),
                  con.sql("SELECT * FROM reviews"), df, arrow):
        assert _expected_keys(con, table) == want, table
    assert leftovers(con) == []


def test_key_types_and_composite_keys(con):
    """Noise is keyed by the key's hash, so different key types get different noise: use a budget
    so large that every key here (weights ≥ 5 ≫ T ≈ 1.03, σ = 0.007) is released w.p. ≈ 1."""
    users, items = random_sets(300, 30, 4, 9)
    d0 = datetime.date(2020, 1, 1)
    tbl = pa.table({
        "user_id": pa.array([str(uuid.UUID(int=int(u) + 1)) for u in users]),
        "big": pa.array(items, pa.int64()),
        "day": pa.array([d0 + datetime.timedelta(days=int(i)) for i in items], pa.date32()),
        "blob": pa.array([bytes([int(i)]) for i in items], pa.binary()),
        "part": pa.array([int(i) % 2 for i in items], pa.int32()),
    })
    con.register("src", tbl)
    con.execute("CREATE TABLE t AS SELECT user_id::UUID AS user_id, big, day, blob, part FROM src")
    sure = dict(GOOD, rho=1e4, max_contributions=4)
    base = sorted(r[0] for r in duckdp.select(con, "t", **(sure | dict(item_col="big"))).items.fetchall())
    assert base == sorted(set(items.tolist()))
    day = sorted(r[0] for r in duckdp.select(con, "t", **(sure | dict(item_col="day"))).items.fetchall())
    assert [(d - d0).days for d in day] == base
    blob = sorted(r[0][0] for r in duckdp.select(con, "t", **(sure | dict(item_col="blob"))).items.fetchall())
    assert blob == base
    comp = duckdp.select(con, "t", **(sure | dict(item_col=["big", "part"])))
    assert comp.items.columns == ["big", "part"]
    assert sorted(r[0] for r in comp.items.fetchall()) == base
    assert all(b % 2 == p for b, p in comp.items.fetchall())


def test_installed_package_ships_sql(tmp_path):
    """An installed (non-editable) duckdp finds its templates via importlib.resources, the mechanism
    folders' templates (duckdp/mechanisms/<family>/sql) included."""
    import os
    import subprocess
    import sys

    code = ("import duckdp, duckdp.templates as t, pathlib; pkg = pathlib.Path(duckdp.__file__).parent; "
            "p = t.sql_dir(); checkout = (pkg.parent / 'pyproject.toml').exists(); "
            "print(checkout, p.is_relative_to(pkg), (p / 'stage_pairs.sql').is_file() "
            "and (checkout or t.template_files()['mad_weights'].is_relative_to(pkg)))")   # a checkout is skipped
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    if out.returncode != 0 and "No module named 'duckdp'" in out.stderr:
        pytest.skip("duckdp is not installed (running from a source checkout)")
    checkout, inside, found = out.stdout.split()
    if checkout == "True":
        pytest.skip("duckdp is installed from a source checkout (editable)")
    assert (inside, found) == ("True", "True"), out.stderr


def test_view_over_a_missing_file_or_table_names_the_view(con, tmp_path):
    path = tmp_path / "gone.parquet"
    con.execute(f"COPY (SELECT range % 5 AS user_id, 'a' AS item FROM range(20)) TO '{path}'")
    con.execute(f"CREATE VIEW over_file AS SELECT * FROM '{path}'")
    con.execute("CREATE TABLE base AS SELECT range % 5 AS user_id, 'a' AS item FROM range(20)")
    con.execute("CREATE VIEW over_table AS SELECT * FROM base")
    path.unlink()
    con.execute("ALTER TABLE base RENAME TO renamed")
    with pytest.raises(SchemaError, match=r"view 'over_file' cannot be read: .*No files found.*gone\.parquet"):
        duckdp.select(con, "over_file", **GOOD)
    with pytest.raises(SchemaError, match=r"view 'over_table' cannot be read: .*base.*does not exist"):
        duckdp.select(con, "over_table", **GOOD)
    assert leftovers(con) == []


@pytest.mark.parametrize("values, kinds", [([1, "a", 2.5], "float, int, str"), ([1, "1", 1.0], "float, int, str"),
                                           ([True, 1, 0], "bool, int")])
@pytest.mark.parametrize("column", ["item", "user_id"])
def test_mixed_type_pandas_columns_are_refused(con, values, kinds, column):
    """[1, '1', 1.0] would silently become the keys '1' and '1.0' (1 and '1' merged); others a raw cast error."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"user_id": list(range(30)) * 3, "item": ["k"] * 90})
    df[column] = pd.Series(values * 30, dtype=object)
    with pytest.raises(DataError, match=f"column '{column}' mixes Python types \\({kinds}\\)"):
        duckdp.select(con, df, **GOOD)
    assert leftovers(con) == []


def test_object_columns_of_one_kind_are_accepted(con):
    pd, np = pytest.importorskip("pandas"), pytest.importorskip("numpy")
    df = pd.DataFrame({"user_id": pd.Series([1, np.int64(2), 3] * 10, dtype=object),
                       "item": pd.Series([[1], [2, 3], [4]] * 10, dtype=object)})
    assert duckdp.select(con, df, **GOOD).items.columns == ["item"]
