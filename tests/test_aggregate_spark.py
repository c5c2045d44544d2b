"""duckdp.aggregate on Spark against DuckDB (docs/specs/private-group-by.md, issue #20 "Engines and scale").

Both engines run the same agg_*.sql templates and draw the same noise (the key's 128-bit counter, digest for
strings and the integer itself for integer keys, under the run's PRF), so where no bound binds (Δ0 above
every user's key count, one row per user and key) a seeded call releases identical numbers. Where Δ0 binds
the engines keep different uniform subsets per user (DuckDB's `hash` vs Spark's `xxhash64`), so only the
plan, not the bounded statistic, is shared. Stage by stage, each Spark stage equals the DuckDB stage on a
small fixed table (clipping, half-even rounding on the grid, NULL values, the row cap, empty keys).

Skipped with a one-line reason without pyspark or Java; run with `-m spark`.
"""
from __future__ import annotations

import math
import re
import shutil
from contextlib import contextmanager, nullcontext
from decimal import Decimal
from pathlib import Path
from unittest import mock

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DATA

import duckdp
from duckdp.aggregate_noise import counters
from duckdp.errors import BudgetExceeded, InvalidParameter
from duckdp.lifecycle import open_run
from duckdp.mechanisms.aggregate import duckdb as D
from duckdp.privacy.aggregate import plan_aggregate
from duckdp.privacy.budget import ZCDP
from duckdp.rng import Randomness
from tests.test_aggregate import ratings

pytestmark = pytest.mark.spark      # JVM start-up: run with `-m spark` (.ci/run does)
pytest.importorskip("pyspark", reason="pyspark not installed (pip install 'duckdp[spark]')")
if shutil.which("java") is None:
    pytest.skip("no Java runtime on PATH (Spark needs Java 17+)", allow_module_level=True)


from duckdp.mechanisms.aggregate import spark as S  # noqa: E402 (after the skip checks)
from duckdp.spark.source import resolve  # noqa: E402 (after the skip checks)
from duckdp.spark.stages import SparkStages  # noqa: E402 (after the skip checks)

METRICS = {"raters": "users", "ratings": "count", "avg": ("mean", "rating", 1, 5)}


@pytest.fixture(scope="module")
def movielens() -> pa.Table:
    path = Path(DATA) / "movielens_100k_ratings.parquet"
    if not path.exists():
        pytest.skip(f"shared dataset {path} not present")
    return pq.read_table(path, columns=["user_id", "item", "rating"])


def both(spark, table: pa.Table, **kw):
    """The same seeded call on DuckDB and on Spark."""
    con = duckdb.connect()
    con.register("t", table)
    df = spark.createDataFrame(table)
    return duckdp.aggregate(con, "t", **kw), duckdp.aggregate(spark, df, **kw)


def assert_identical(a, b) -> None:
    """Same plan (σ, threshold, spent) and the same released table, value for value, in the same order."""
    assert [(m.metric, m.part, m.sigma, m.step) for m in a.plan.measures] == \
           [(m.metric, m.part, m.sigma, m.step) for m in b.plan.measures]
    assert a.plan.threshold == b.plan.threshold and a.spent == b.spent
    ta, tb = a.to_arrow(), b.to_arrow()
    assert ta.column_names == tb.column_names
    n_keys = len(a.key_names)
    assert [f.type for f in ta.schema][n_keys:] == [f.type for f in tb.schema][n_keys:]      # metric dtypes
    for name in ta.column_names:
        assert ta.column(name).to_pylist() == tb.column(name).to_pylist(), name


# ---------------------------------------------------------------- cross-engine on MovieLens 100k

@pytest.mark.parametrize("keys, integer_keys", [("threshold", False), ("dpsips", True)])
def test_movielens_identical_releases_under_a_seed(spark, movielens, keys, integer_keys):
    """Per movie raters, ratings and mean rating: the same σ per measure, and the same released keys and
    numbers (with intervals) on both engines — string keys (MD5 counters) and integer keys (the integer).
    Δ0 = 800 > 737, the most movies one user rated, and one rating per (user, movie): no bound binds."""
    table = movielens
    if integer_keys:
        table = table.set_column(1, "item", table.column("item").cast(pa.int64()))
    a, b = both(spark, table, by="item", metrics=METRICS, keys=keys, rho=0.5, delta=1e-6, max_contributions=800,
                confidence=0.9, seed=11)
    assert len(a) > 20
    assert_identical(a, b)
    assert b.items.toArrow().equals(b.to_arrow())        # items: a Spark DataFrame listed by key


# ---------------------------------------------------------------- keys="threshold" on the executors (stop 29)

SHARED_COUNTERS = {     # 3 counters for every key (by its last digit mod 3), the same on both engines
    "duckdb": ("0::BIGINT", "(CAST(right(_dp_k0, 1) AS UBIGINT) % 3)", False),
    "spark": ("CAST(0 AS BIGINT)", "CAST(pmod(CAST(substring(_dp_k0, -1, 1) AS BIGINT), 3) AS BIGINT)", True)}


@pytest.mark.parametrize("collide", [False, True])
def test_threshold_runs_on_the_executors_releasing_duckdbs_numbers(spark, collide):
    """keys="threshold" on Spark noises and thresholds its candidates on the executors: the driver collects only
    the released keys (every `toArrow` of the call ≤ the keys released, against 360 candidates), and the seeded
    release equals DuckDB's, whose stream draws as before — in Arrow batches of 7 keys too, and where keys share
    a counter (forced: 3 counters for 360 keys), whose collision ranks Spark computes as DuckDB's SQL does."""
    tail = pa.table({"user_id": pa.array(range(10**5, 10**5 + 300), pa.int64()),      # 300 keys of one user each
                     "item": [f"t{k:03d}" for k in range(300)], "rating": pa.array([3] * 300, pa.int64())})
    t = pa.concat_tables([ratings(n_users=2000, n_keys=60, seed=6), tail])
    kw = {"by": "item", "metrics": METRICS, "keys": "threshold", "rho": 2.0, "delta": 1e-6, "max_contributions": 8,
          "seed": 4, "confidence": 0.9}
    DataFrame = type(spark.range(1))            # the session's own class (classic or Connect)
    collected: list[int] = []
    to_arrow = DataFrame.toArrow

    def spy(self):
        out = to_arrow(self)
        collected.append(out.num_rows)
        return out

    con = duckdb.connect()
    con.register("t", t)
    with mock.patch.object(D, "_counter_idents", lambda ctx: SHARED_COUNTERS["duckdb"]) if collide else nullcontext():
        a = duckdp.aggregate(con, "t", **kw)
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        with (mock.patch.object(S, "counter_sql", lambda schema, keys: SHARED_COUNTERS["spark"]) if collide
              else nullcontext()), mock.patch.object(DataFrame, "toArrow", spy):
            b = duckdp.aggregate(spark, spark.createDataFrame(t), **kw)
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
    assert 20 < len(b) <= 60 and collected and max(collected) <= len(b)
    assert_identical(a, b)


@pytest.mark.parametrize("partitions", ["1", "5"])
def test_threshold_reads_its_candidates_once_in_the_sessions_partitions(spark, capsys, partitions):
    """keys="threshold" on Spark (stop 30): the candidates are ranked by a window over their counter inside a hash
    partitioning into `spark.sql.shuffle.partitions` parts, and the released keys sorted in one partition — nothing
    stored (no frame is `store`d), no range partitioning (whose sampling job would run the query, and the rule,
    again), the template's ORDER BY dropped — and the release is DuckDB's whatever the partition count, with keys
    sharing a counter (forced) ranked across partitions as DuckDB ranks them."""
    tail = pa.table({"user_id": pa.array(range(10**5, 10**5 + 300), pa.int64()),
                     "item": [f"t{k:03d}" for k in range(300)], "rating": pa.array([3] * 300, pa.int64())})
    t = pa.concat_tables([ratings(n_users=2000, n_keys=60, seed=6), tail])
    kw = {"by": "item", "metrics": METRICS, "keys": "threshold", "rho": 2.0, "delta": 1e-6, "max_contributions": 8,
          "seed": 5}
    con = duckdb.connect()
    con.register("t", t)
    with mock.patch.object(D, "_counter_idents", lambda ctx: SHARED_COUNTERS["duckdb"]):
        a = duckdp.aggregate(con, "t", **kw)
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    try:
        with mock.patch.object(S, "counter_sql", lambda schema, keys: SHARED_COUNTERS["spark"]), \
                mock.patch.object(SparkStages, "store", side_effect=AssertionError("a frame was stored")):
            b = duckdp.aggregate(spark, spark.createDataFrame(t), **kw)
        thr = plan_aggregate(ZCDP(0.5, 1e-6), STAGE_METRICS, max_contributions=10, keys="threshold")
        with engines(spark, stage_table(False)) as (_, sp):         # digest counters: ranked by the window
            S.user_counts(sp, thr).explain()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    assert 20 < len(b) <= 60
    assert_identical(a, b)
    plan = capsys.readouterr().out
    exchanges = re.findall(r"Exchange (\w+\(_dp_chi[^)]*\)|SinglePartition), (\w+)", plan)
    assert [e[1] for e in exchanges] == ["REPARTITION_BY_NUM"], plan        # the window reads that one partitioning
    assert exchanges[0][0].endswith(f", {partitions})") if partitions != "1" else exchanges[0][0] == "SinglePartition"
    assert "rangepartitioning" not in plan and "InMemory" not in plan, plan


# ---------------------------------------------------------------- public keys, pre_threshold, order and dtypes

def test_public_keys_on_spark(spark):
    """Every public key and no other, in key order, a key with no rows included (pure noise, around 0),
    identical to DuckDB; given as a list, a Spark DataFrame, a table name or a pandas DataFrame."""
    t = ratings()
    public = ["k005", "nobody", "k001", "k005"]
    a, b = both(spark, t, by="item", metrics=METRICS, keys=public, rho=0.5, delta=1e-6, max_contributions=50,
                seed=3)
    assert b.to_arrow().column("item").to_pylist() == ["k001", "k005", "nobody"]
    assert b.plan.selection_budget is None and b.spent.zcdp_delta == 0
    assert_identical(a, b)
    nobody = b.to_arrow().slice(2, 1).to_pylist()[0]
    sigma = b.plan.measure("raters", "users").sigma
    assert abs(nobody["raters"]) <= 6 * sigma and abs(nobody["ratings"]) <= 6 * b.plan.measure("ratings", "count").sigma
    spark.createDataFrame(pa.table({"item": ["k002", "zz"]})).createOrReplaceTempView("pub_keys")
    df = spark.createDataFrame(t)
    for given in ("pub_keys", pa.table({"item": ["k002", "zz"]}).to_pandas()):
        assert S.read_keys(spark, given).column("item").to_pylist() == ["k002", "zz"]
    got = duckdp.aggregate(spark, df, by="item", metrics={"n": "count"}, keys=spark.table("pub_keys"), rho=0.5,
                           delta=1e-6, max_contributions=50, seed=3)
    assert got.to_arrow().column("item").to_pylist() == ["k002", "zz"]
    with pytest.raises(InvalidParameter, match="neither a select"):
        duckdp.aggregate(spark, df, by="item", metrics={"n": "count"}, keys="no_such_table_or_algo", rho=0.5,
                         delta=1e-6)


def test_composite_keys_identical(spark):
    """by= two columns (MD5 counters of the composite encoding): public key tuples, one with no rows, and
    keys='threshold' release the same numbers on both engines."""
    t = ratings(n_users=1500, n_keys=20, seed=4)
    t = t.append_column("g", pa.array([u % 3 for u in t.column("user_id").to_pylist()], pa.int64()))
    kw = {"by": ["item", "g"], "rho": 1.0, "delta": 1e-6, "max_contributions": 50, "seed": 9,
          "metrics": {"n": "users", "s": ("sum", "rating", 1, 5)}}
    a, b = both(spark, t, keys=[("k001", 0), ("k001", 2), ("nobody", 1)], **kw)
    assert b.to_arrow().select(["item", "g"]).to_pylist() == [{"item": "k001", "g": 0}, {"item": "k001", "g": 2},
                                                               {"item": "nobody", "g": 1}]
    assert_identical(a, b)
    a, b = both(spark, t, keys="threshold", **kw)
    assert len(b) > 5
    assert_identical(a, b)


def test_threshold_with_pre_threshold_identical(spark):
    """keys='threshold' with pre_threshold=k (spec §4.4) runs on Spark: keys under k users stay out, and the
    release equals DuckDB's under the seed."""
    t = ratings(n_users=2000, n_keys=60, seed=2)
    a, b = both(spark, t, by="item", metrics={"n": "users", "c": "count"}, keys="threshold", pre_threshold=40,
                rho=2.0, delta=1e-6, max_contributions=50, seed=5)
    assert len(b) > 0
    assert_identical(a, b)


def test_count_selection_with_pre_threshold_identical(spark):
    """keys='count_gaussian' with pre_threshold=k: the selection on users − (k − 1) runs the same template on
    Spark (agg_pre_threshold.sql) and releases DuckDB's keys and numbers under the seed (Δ0 = 60 ≥ the 60
    keys, so no bound binds); keys under k users never appear."""
    t = ratings(n_users=2000, n_keys=60, seed=2)
    a, b = both(spark, t, by="item", metrics={"n": "users", "c": "count"}, keys="count_gaussian", pre_threshold=40,
                rho=2.0, delta=1e-6, max_contributions=60, seed=5)
    assert len(b) > 0
    assert_identical(a, b)
    users = pa.TableGroupBy(t, "item").aggregate([("user_id", "count_distinct")])
    few = {k for k, n in zip(users.column(0).to_pylist(), users.column(1).to_pylist(), strict=True) if n < 40}
    assert not few & set(b.to_arrow().column("item").to_pylist())


def test_order_and_dtypes_are_functions_of_the_request(spark):
    """Sorted by key in `items` and `to_arrow()`; the same dtypes whether many keys or none are released."""
    df = spark.createDataFrame(ratings(n_users=2000))
    kw = {"by": "item", "metrics": {"raters": "users", "stars": ("sum", "rating", 1, 5),
                                   "avg": ("mean", "rating", 1, 5)}, "keys": "threshold", "delta": 1e-6,
          "max_contributions": 50, "confidence": 0.9, "seed": 1}
    many = duckdp.aggregate(spark, df, rho=2.0, **kw)
    none = duckdp.aggregate(spark, df, rho=1e-6, **kw)
    assert len(many) > 5 and len(none) == 0
    keys = many.to_arrow().column("item").to_pylist()
    assert keys == sorted(keys) and many.items.toArrow().column("item").to_pylist() == keys
    assert many.to_arrow().schema == none.to_arrow().schema
    assert many.items.schema == none.items.schema
    assert [f.type for f in many.to_arrow().schema][1:] == [pa.int64()] * 3 + [pa.float64()] * 6


# ---------------------------------------------------------------- budget on Spark

def test_session_charges_once_and_refuses_an_overrun_before_reading(spark):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(ratings())
    s = duckdp.Session(spark, rho=1.0, delta=1e-5)
    s.aggregate(df, by="item", metrics=METRICS, keys=["k001", "k002"], rho=0.6, delta=1e-6, max_contributions=20)
    assert len(s.events) == 1 and math.isclose(s.spent.value, 0.6)
    poisoned = df.withColumn("rating", F.expr("CAST(raise_error('data was read') AS BIGINT)"))
    with pytest.raises(BudgetExceeded):
        s.aggregate(poisoned, by="item", metrics=METRICS, keys=["k001"], rho=0.6, delta=1e-6, max_contributions=20)
    assert len(s.events) == 1


def test_selection_without_spark_stages_refused_before_the_charge(spark):
    acc = duckdp.Accountant.for_budget(ZCDP(1.0, 1e-5))
    with pytest.raises(InvalidParameter, match="run only on DuckDB"):
        duckdp.aggregate(spark, spark.createDataFrame(ratings()), by="item", metrics=METRICS, keys="policy_gaussian",
                         rho=0.5, delta=1e-6, accountant=acc)
    assert acc.committed == []


# ---------------------------------------------------------------- stage contract: Spark stage == DuckDB stage

H = 2.0 ** -15       # half a grid step for bounds [0, 4] and [-1, 3] (step 2^-14): tests round half to even
ROWS = [(1, "a", H), (1, "b", 3 * H), (2, "a", 5 * H), (2, "b", -7.0), (3, "a", 9.0), (3, "c", None),
        (4, "c", 1.25), (4, "a", 7 * H), (5, "a", 2.0), (5, "a", 2.0), (5, "a", 2.0), (6, "b", None),
        (6, "b", 1.0), (7, "c", 0.5), (7, "b", 2.5), (7, "a", 3.5)]
PUBLIC = ["a", "b", "c", "nobody"]
INT_KEYS = {"a": 1, "b": -2, "c": 3, "nobody": 2**40}
STAGE_METRICS = {"u": "users", "n": "count", "s": ("sum", "v", 0, 4), "m": ("mean", "v", -1, 3),
                 "w": ("variance", "v", -1, 3)}     # a spread: its centred sum of squares on Spark's exact type


def stage_table(integer: bool) -> pa.Table:
    items = [INT_KEYS[r[1]] if integer else r[1] for r in ROWS]
    return pa.table({"user_id": pa.array([r[0] for r in ROWS], pa.int64()), "item": items,
                     "v": pa.array([r[2] for r in ROWS], pa.float64())})


@contextmanager
def engines(spark, table: pa.Table, seed: int = 0):
    con = duckdb.connect()
    with open_run(con, table, "user_id", "item", Randomness(seed)) as duck:
        sp = SparkStages(spark, resolve(spark, spark.createDataFrame(table), "user_id", "item"), Randomness(seed))
        try:
            yield duck, sp
        finally:
            sp.close()


def duck_rows(duck, frame) -> list[tuple]:
    return sorted(duck.ctx.con.sql(frame.sql, params=frame.params).fetchall(), key=repr)


def spark_rows(frame) -> list[tuple]:
    """Rows as DuckDB returns them: Spark's DECIMAL(38, 0) sums (DuckDB's HUGEINT) as int."""
    return sorted((tuple(int(x) if isinstance(x, Decimal) else x for x in r) for r in frame.collect()), key=repr)


def keyset_table(duck, integer: bool) -> pa.Table:
    keys = sorted(INT_KEYS[k] for k in PUBLIC) if integer else sorted(PUBLIC)
    return pa.table({"_dp_k0": keys}).cast(D.key_schema(duck))


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("max_rows", [1, 2])
def test_stages_equal_duckdb(spark, integer, max_rows):
    """restrict, bound_keys (Δ0 not binding), measures (users, count, clipped half-even grid sums, means' centred
    sums and counts, NULL values, the row cap, a key with no rows) and their counters: Spark == DuckDB."""
    plan = plan_aggregate(ZCDP(0.5, 1e-6), STAGE_METRICS, max_contributions=10, max_rows_per_key=max_rows,
                          keys="public")
    with engines(spark, stage_table(integer)) as (duck, sp):
        keys = keyset_table(duck, integer)
        assert S.key_schema(sp).names == ["_dp_k0"]
        kd, ks = D.keyset(duck, keys), S.keyset(sp, keys)
        rd, rs = D.restrict(duck, plan, kd), S.restrict(sp, plan, ks)
        assert spark_rows(rs) == duck_rows(duck, rd) and len(duck_rows(duck, rd)) == len(ROWS)
        bd, bs = D.bound_keys(duck, plan, rd), S.bound_keys(sp, plan, rs)
        assert spark_rows(bs) == duck_rows(duck, bd)
        md, ms = D.measures(duck, plan, bd, kd), S.measures(sp, plan, bs, ks)
    assert ms.column("_dp_k0").to_pylist() == md.column("_dp_k0").to_pylist() == keys.column(0).to_pylist()
    assert [c.tolist() for c in counters(ms)] == [c.tolist() for c in counters(md)]
    for i, m in enumerate(plan.measures):
        assert ms.column(f"_dp_m{i}").to_pylist() == md.column(f"_dp_m{i}").to_pylist(), (m.metric, m.part)
        assert ms.column(f"_dp_m{i}").type == pa.int64()
    s = md.column(f"_dp_m{[m.metric for m in plan.measures].index('s')}").to_pylist()
    # key b: 3H → 1.5 steps → 2; −7 → clipped to 0; NULL dropped, 1.0 → 2^14; 2.5 → 2.5·2^14 (half-even grid)
    assert s[keys.column(0).to_pylist().index(INT_KEYS["b"] if integer else "b")] == 2 + 0 + 2**14 + 40960


@pytest.mark.parametrize("pre_threshold", [1, 2])
def test_user_counts_and_truncation_equal_duckdb(spark, pre_threshold):
    """keys="threshold"'s user_counts (Δ0 not binding) equal DuckDB's: c, counters and the measures of the same
    kept pairs (spec §4.2); with Δ0 = 1 each engine keeps exactly one of each user's keys (its own; which one is
    each engine's keyed choice)."""
    table = stage_table(False)
    thr = plan_aggregate(ZCDP(0.5, 1e-6), STAGE_METRICS, max_contributions=10, max_rows_per_key=2, keys="threshold",
                         pre_threshold=pre_threshold)
    with engines(spark, table) as (duck, sp):
        cd = D.user_counts(duck, thr).read_all().sort_by("_dp_k0")          # both streams come in engine order
        cs = S.user_counts(sp, thr).orderBy("_dp_k0").toArrow()
        plan = plan_aggregate(ZCDP(0.5, 1e-6), {"n": "count"}, max_contributions=1, keys="public")
        keys = keyset_table(duck, False)
        kept = spark_rows(S.bound_keys(sp, plan, S.restrict(sp, plan, S.keyset(sp, keys))))
        one = [(r[0], r[1], r[-1]) for r in kept]               # user, key, _dp_d
    assert cs.column("_dp_k0").to_pylist() == cd.column("_dp_k0").to_pylist()
    assert cs.column("_dp_c").to_pylist() == cd.column("_dp_c").to_pylist()
    assert [c.tolist() for c in counters(cs)] == [c.tolist() for c in counters(cd)]
    assert cs.column_names == cd.column_names and len(cd.column_names) == 5 + len(thr.measures) - 1
    assert cs.column("_dp_rank").to_pylist() == cd.column("_dp_rank").to_pylist()
    assert all(cs.column(n).to_pylist() == cd.column(n).to_pylist() for n in cd.column_names if n.startswith("_dp_m"))
    own = {(u, k) for u, k, _ in ROWS}
    assert sorted(u for u, *_ in one) == sorted({u for u, *_ in ROWS}) and all((u, k) in own for u, k, _ in one)
    assert np.all(np.asarray([d for *_, d in one]) == 1.0)


# ---------------------------------------------------------------- declared not-null value columns

@pytest.mark.parametrize("max_rows", [1, 2])
def test_declared_not_null_stages_equal_duckdb(spark, max_rows):
    """With v declared not-null, a NULL is sampled last but, when kept, counted and read as the grid midpoint
    (spec §3.1), identically on both engines; the means' count is the row count."""
    plan = plan_aggregate(ZCDP(0.5, 1e-6), STAGE_METRICS, max_contributions=10, max_rows_per_key=max_rows,
                          keys="public", not_null=["v"])
    assert plan.measure("m", "count") is plan.measure("n", "count")
    with engines(spark, stage_table(False)) as (duck, sp):
        keys = keyset_table(duck, False)
        kd, ks = D.keyset(duck, keys), S.keyset(sp, keys)
        rd, rs = D.restrict(duck, plan, kd), S.restrict(sp, plan, ks)
        bd, bs = D.bound_keys(duck, plan, rd), S.bound_keys(sp, plan, rs)
        md, ms = D.measures(duck, plan, bd, kd), S.measures(sp, plan, bs, ks)
    for i, m in enumerate(plan.measures):
        assert ms.column(f"_dp_m{i}").to_pylist() == md.column(f"_dp_m{i}").to_pylist(), (m.metric, m.part)
    col = {(m.metric, m.part): md.column(f"_dp_m{i}").to_pylist() for i, m in enumerate(plan.measures)}
    b, c = PUBLIC.index("b"), PUBLIC.index("c")
    rows = plan.measure("n", "count")
    n = col[(rows.metric, rows.part)]          # the row count (its first reader is u only with m = 1)
    # key b: users 1, 2, 6, 7; user 6 holds (NULL, 1.0): NULL sampled last, kept only with m = 2 (midpoint 2^15)
    assert n[b] == (4 if max_rows == 1 else 5)
    assert col[("s", "sum")][b] == 2 + 0 + 2**14 + 40960 + (0 if max_rows == 1 else 2**15)
    # key c: user 3's only row is NULL: counted, adding 0 to the centred sum of m on [−1, 3] (offset 2^14)
    assert n[c] == 3
    assert col[("m", "sum")][c] == (round(1.25 * 2**14) - 2**14) + (round(0.5 * 2**14) - 2**14)


def test_declared_not_null_release_identical(spark):
    """A seeded release with NULLs in a declared column: the same plan and numbers on DuckDB and Spark."""
    table = stage_table(False)
    a, b = both(spark, table, by="item", metrics=STAGE_METRICS, keys=PUBLIC, rho=0.5, delta=1e-6,
                max_contributions=10, not_null=["v"], seed=4)
    # the row count (u, n, m's and w's count), s, m's (and w's) centred sum, w's sum of squares, and s's own
    # centred sum that links it (spec §3.2)
    assert [(m.metric, m.part) for m in a.plan.measures] == [("u", "count"), ("s", "sum"), ("m", "sum"),
                                                             ("w", "squares"), ("s", "centred")]
    assert_identical(a, b)


@pytest.mark.parametrize("keys, metrics, part", [
    ("threshold", {"raters": "users", "stars": ("sum", "rating", 1, 5), "avg": ("mean", "rating", 1, 5)}, "count"),
    ("dpsips", {"raters": "users", "stars": ("sum", "rating", 1, 5)}, "centred"),
])
def test_a_sums_own_link_measure_identical(spark, keys, metrics, part):
    """A declared column, m = 1 (spec §3.2): with keys='threshold' a sum and a mean on the same bounds, the sum's
    own row count ("The threshold's count"); a sum beside users, its own centred sum ("A count drawn anyway") —
    one more measure the engines compute; the same plan and numbers on both."""
    t = ratings(n_users=1500, n_keys=30, seed=5)
    a, b = both(spark, t, by="item", keys=keys, rho=1.0, delta=1e-6, max_contributions=20, seed=6,
                not_null="rating", confidence=0.9, metrics=metrics)
    assert a.plan.measure("stars", "link").part == part and a.plan.links and len(b) > 10
    assert_identical(a, b)
