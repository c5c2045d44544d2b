"""Every mechanism (and count release): interruption leaves nothing behind and is charged; file-backed
and read-only databases, every input kind, key type and adversarial identifier; bad parameters."""
import datetime
import uuid

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from conftest import leftovers, make_table, random_sets

import duckdp
from duckdp import InvalidParameter, Session
from duckdp.run import RunContext

ALGOS = [a["name"] for a in duckdp.algorithms()] + ["pcr"]
DESC = {a["name"]: a for a in duckdp.algorithms()}


def budget(algo: str, sure: bool = False) -> dict:
    """The algo's budget keywords: zCDP where it takes it, else (ε, δ); `sure` releases every key
    held by a few users (σ, λ ≈ 1e-3 and thresholds ≈ 1)."""
    if algo == "pcr" or "rho/delta" in DESC[algo]["budgets"]:
        return dict(rho=1e4 if sure else 0.5, delta=1e-5)
    return dict(epsilon=1e3 if sure else 2.0, delta=1e-5)


def release(con, table, algo, sure=False, session=None, **kw):
    """Run `algo` (or count release) and return its keys as a sorted list of tuples."""
    target = session or duckdp
    if algo == "pcr":
        r = target.count_release(con, table, seed=3, **budget(algo, sure), **kw) if session is None else \
            target.count_release(table, seed=3, **budget(algo, sure), **kw)
        keys = r.to_arrow().drop_columns(["noisy_count", "sigma"])
    else:
        extra = {"allow_unproven": True} if DESC[algo]["unproven"] else {}
        if sure and "alpha" in DESC[algo]["params"]:
            extra["alpha"] = 40.0        # the policies' cap Γ = T + α·scale: a key at Γ misses T w.p. ≤ e^{−40}
        args = dict(algo=algo, max_contributions=4, seed=3, **budget(algo, sure), **extra, **kw)
        r = target.select(con, table, **args) if session is None else target.select(table, **args)
        keys = r.to_arrow()
    return sorted(map(tuple, zip(*[c.to_pylist() for c in keys.columns], strict=True)))


@pytest.fixture
def data(con):
    users, items = random_sets(300, 40, 5, 3)
    make_table(con, "t", users, items)
    return con


# -- interruption ----------------------------------------------------------------------------------
def _count_renders(con, algo, monkeypatch):
    calls = []
    original = RunContext.render
    monkeypatch.setattr(RunContext, "render", lambda self, *a: calls.append(1) or original(self, *a))
    release(con, "t", algo)
    monkeypatch.setattr(RunContext, "render", original)
    return len(calls)


@pytest.mark.parametrize("algo", ALGOS)
def test_interrupted_at_every_stage_leaves_nothing_and_is_charged(data, monkeypatch, algo):
    """Raise at each template render in turn (every SQL stage, so between rounds too), once as a
    KeyboardInterrupt: no temp table, view or UDF survives, and the session keeps the charge."""
    con = data
    stages = _count_renders(con, algo, monkeypatch)
    assert stages >= 1
    full = Session(con, epsilon=1e6, delta=0.9)
    release(con, "t", algo, session=full)
    charge = full.ledger.column("charge")[0].as_py()
    original = RunContext.render
    for stage in range(stages):
        error = KeyboardInterrupt if stage == stages - 1 else RuntimeError
        seen = []

        def failing(self, *a, stage=stage, error=error, seen=seen):
            seen.append(1)
            if len(seen) > stage:
                raise error(f"injected at stage {stage}")
            return original(self, *a)

        monkeypatch.setattr(RunContext, "render", failing)
        s = Session(con, epsilon=1e6, delta=0.9)
        with pytest.raises(error, match="injected"):
            release(con, "t", algo, session=s)
        monkeypatch.setattr(RunContext, "render", original)
        assert leftovers(con) == [], (algo, stage)
        (row,) = s.ledger.to_pylist()
        assert row["charge"] == charge and row["released"] is None and row["error"].startswith(error.__name__)


def test_dpsips_interrupted_between_rounds(data, monkeypatch):
    """KeyboardInterrupt after round 0 stored its keys: the run's tables and UDFs are gone."""
    from duckdp.mechanisms import dpsips

    original, calls = dpsips.round_keys, []

    def second_round_interrupts(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            assert data.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '_duckdp_%released%'"
                            ).fetchall()[0][0] == 1
            raise KeyboardInterrupt
        return original(*a, **k)

    monkeypatch.setattr(dpsips, "round_keys", second_round_interrupts)
    s = Session(data, rho=1.0, delta=1e-5)
    with pytest.raises(KeyboardInterrupt):
        s.select("t", algo="dpsips", rho=0.5, delta=1e-6, max_contributions=4, iterations=3)
    assert leftovers(data) == [] and s.spent.value == 0.5 and s.ledger["error"][0].as_py() == "KeyboardInterrupt: "


@pytest.mark.parametrize("kind", ["gaussian", "laplace", "uniform"])
def test_failing_noise_source_leaves_nothing(data, monkeypatch, kind):
    """An exception inside the noise pass is cleaned up too."""
    from duckdp import noise_stage

    def broken(*args, **kwargs):
        raise RuntimeError("noise source failed")

    monkeypatch.setattr(noise_stage, "noise", broken)      # the stage's PRF noise call (duckdp/prf.py)
    algo = {"gaussian": "mad2r", "laplace": "policy_laplace", "uniform": "truncated_geometric"}[kind]
    with pytest.raises(RuntimeError, match="noise source failed"):
        release(data, "t", algo)
    assert leftovers(data) == []


def test_policy_interrupted_inside_the_user_loop(data, monkeypatch):
    """KeyboardInterrupt while the Arrow reader streams users: reader closed, nothing left behind."""
    from duckdp.mechanisms import policy

    def interrupted(batches, *a, **k):
        next(iter(batches))
        raise KeyboardInterrupt

    monkeypatch.setattr(policy, "update_loop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        release(data, "t", "policy_gaussian")
    assert leftovers(data) == []


# -- databases and inputs --------------------------------------------------------------------------
def test_file_backed_and_read_only_databases(tmp_path):
    """Every mechanism gives the same seeded release on an in-memory, a file-backed and a
    read-only database, and never writes the file."""
    users, items = random_sets(300, 40, 5, 3)
    path = str(tmp_path / "f.duckdb")
    with duckdb.connect(path) as fcon:
        make_table(fcon, "t", users, items)
        file_results = {a: release(fcon, "t", a) for a in ALGOS}
        assert leftovers(fcon) == []
    mtime = (tmp_path / "f.duckdb").stat().st_mtime_ns
    with duckdb.connect(path, read_only=True) as rcon:
        ro_results = {a: release(rcon, "t", a) for a in ALGOS}
        assert leftovers(rcon) == []
    assert (tmp_path / "f.duckdb").stat().st_mtime_ns == mtime
    with duckdb.connect() as mcon:
        make_table(mcon, "t", users, items)
        for a in ALGOS:
            mem = release(mcon, "t", a)
            assert file_results[a] == mem == ro_results[a], a


@pytest.mark.parametrize("algo", ALGOS)
def test_every_input_kind(data, tmp_path, algo):
    con = data
    want = release(con, "t", algo)
    assert want, "the fixture should release something"
    path = str(tmp_path / "t.parquet")
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    con.execute("CREATE VIEW v AS SELECT * FROM t")
    con.execute("CREATE TEMP TABLE tt AS SELECT * FROM t")
    con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    con.execute("CREATE TABLE other.main.ext AS SELECT * FROM t")
    for table in ("v", "tt", "other.main.ext", con.read_parquet(path), con.sql("SELECT * FROM t"),
                  con.sql("SELECT * FROM t").df(), con.sql("SELECT * FROM t").to_arrow_table()):
        assert release(con, table, algo) == want, (algo, table)
    assert leftovers(con) == []


@pytest.fixture
def typed(con):
    """Keys of every type: each of 30 keys is held by about 40 users, so `sure` budgets release all."""
    rng = np.random.default_rng(9)
    users = np.repeat(np.arange(300), 4)
    items = np.concatenate([rng.choice(30, 4, replace=False) for _ in range(300)])
    day0 = datetime.date(2020, 1, 1)
    con.register("src", pa.table({
        "user_id": pa.array(users, pa.int64()), "big": pa.array(items, pa.int64()),
        "word": pa.array([f"w{i}" for i in items]), "uid": pa.array([str(uuid.UUID(int=int(i) + 1)) for i in items]),
        "day": pa.array([day0 + datetime.timedelta(days=int(i)) for i in items], pa.date32()),
        "blob": pa.array([bytes([int(i)]) for i in items], pa.binary()),
        "part": pa.array(items % 2, pa.int32())}))
    con.execute("CREATE TABLE k AS SELECT user_id, big, word, uid::UUID AS uid, day, blob, part FROM src")
    con.unregister("src")
    return con, sorted(set(items.tolist()))


DECODE = {"big": lambda v: v, "word": lambda v: int(v[1:]), "uid": lambda v: uuid.UUID(str(v)).int - 1,
          "day": lambda v: (v - datetime.date(2020, 1, 1)).days, "blob": lambda v: v[0]}


@pytest.mark.parametrize("algo", ALGOS)
def test_key_types_and_composite_keys(typed, algo):
    con, everything = typed
    for col, decode in DECODE.items():
        got = release(con, "k", algo, sure=True, item_col=col)
        assert sorted(decode(k[0]) for k in got) == everything, (algo, col)
    comp = release(con, "k", algo, sure=True, item_col=["big", "part"])
    assert [k[0] for k in comp] == everything and all(b % 2 == p for b, p in comp)
    assert leftovers(con) == []


@pytest.mark.parametrize("algo", ALGOS)
def test_adversarial_identifiers(data, algo):
    con = data
    con.execute('CREATE TABLE "x""; DROP TABLE t; --" AS SELECT user_id AS "Ü ""id""; --", item AS "select" FROM t')
    state = con.sql("SELECT count(*), sum(hash(COLUMNS(*))) FROM t").fetchall()
    tables = con.sql("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
    got = release(con, 'x"; DROP TABLE t; --', algo, user_col='Ü "id"; --', item_col="select")
    assert got == release(con, "t", algo)
    assert con.sql("SELECT count(*), sum(hash(COLUMNS(*))) FROM t").fetchall() == state
    assert con.sql("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall() == tables
    assert leftovers(con) == []


@pytest.mark.parametrize("algo", ALGOS)
def test_empty_and_single_user_inputs(con, algo):
    con.execute("CREATE TABLE e (user_id BIGINT, item VARCHAR)")
    assert release(con, "e", algo) == []
    con.execute("CREATE TABLE one AS SELECT 1::BIGINT AS user_id, 'a' || range AS item FROM range(3)")
    assert set(release(con, "one", algo)) <= {("a0",), ("a1",), ("a2",)}
    assert leftovers(con) == []


GARBAGE = ["x", float("nan"), float("inf"), True, [1]]


@pytest.mark.parametrize("algo", [a for a in ALGOS if a != "pcr" and DESC[a]["params"]])
def test_every_parameter_refuses_garbage_cleanly(data, algo):
    """Each declared parameter refuses non-numbers, NaN, inf and booleans with InvalidParameter;
    None means the default; 0 and −1 are either valid or refused the same way — never a TypeError
    from deep inside — and the database is unchanged."""
    con = data
    state = con.sql("SELECT count(*), sum(hash(COLUMNS(*))) FROM t").fetchall()
    for name in DESC[algo]["params"]:
        for value in GARBAGE:
            with pytest.raises(InvalidParameter, match=name):
                release(con, "t", algo, **{name: value})
        assert release(con, "t", algo, **{name: None}) == release(con, "t", algo)
        for value in (0, -1):
            try:
                release(con, "t", algo, **{name: value})
            except InvalidParameter:
                pass
    assert con.sql("SELECT count(*), sum(hash(COLUMNS(*))) FROM t").fetchall() == state
    assert leftovers(con) == []
