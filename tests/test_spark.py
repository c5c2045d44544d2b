"""duckdp on Spark against DuckDB: identical weights, counters and plans; statistically equal
releases; privacy audits (with power) on the Spark path; clear errors.

Skipped with a one-line reason without pyspark or a Java runtime. One local[2] SparkSession for all
Spark test files (tests/conftest.py), with few shuffle partitions to stay fast on small data.
"""
import math
import os
import shutil
from collections import defaultdict
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from conftest import DATA

import duckdp
from duckdp.errors import DataError, InvalidParameter, SchemaError
from duckdp.mechanisms.base import Params

pytestmark = pytest.mark.spark      # JVM start-up: run with `-m spark` (.ci/run does)
pyspark = pytest.importorskip("pyspark", reason="pyspark not installed (pip install 'duckdp[spark]')")
if shutil.which("java") is None:
    pytest.skip("no Java runtime on PATH (Spark needs Java 17+)", allow_module_level=True)

from duckdp.rng import Randomness  # noqa: E402 (after the skip checks)
from duckdp.spark.noise import counters  # noqa: E402 (after the skip checks)
from duckdp.spark.source import resolve as spark_resolve  # noqa: E402 (after the skip checks)
from duckdp.spark.stages import SparkStages  # noqa: E402 (after the skip checks)


def spark_weights(spark, table: pa.Table, d0: int, exponent: float) -> dict:
    stages = SparkStages(spark, spark_resolve(spark, spark.createDataFrame(table), "user_id", "item"), Randomness(1))
    w = stages.weights(stages.truncate(stages.sized(stages.pairs()), d0), exponent).toArrow()
    return dict(zip(w.column("_dp_k0").to_pylist(), w.column("_dp_w").to_pylist(), strict=True))


def duckdb_weights(table: pa.Table, d0: int, exponent: float) -> dict:
    from duckdp.lifecycle import open_run

    con = duckdb.connect()
    con.register("t", table)
    with open_run(con, "t", "user_id", "item", Randomness(1)) as stages:
        q = stages.weights(stages.truncate(stages.sized(stages.pairs()), d0), exponent)
        w = con.sql(q.sql, params=q.params).to_arrow_table()
    return dict(zip(w.column("_dp_k0").to_pylist(), w.column("_dp_w").to_pylist(), strict=True))


def shared(name: str, rows: int | None = None) -> pa.Table:
    path = Path(os.environ.get("DUCKDP_DATA", DATA)) / f"{name}.parquet"      # ../shared/data by default
    if not path.exists():
        pytest.skip(f"shared dataset {path} not present")
    con = duckdb.connect()
    limit = f"WHERE user_id IN (SELECT DISTINCT user_id FROM '{path}' ORDER BY user_id LIMIT {rows})" if rows else ""
    return con.sql(f"SELECT user_id, item FROM '{path}' {limit}").to_arrow_table()


def max_keys_per_user(table: pa.Table) -> int:
    con = duckdb.connect()
    con.register("t", table)
    (d0,), = con.sql("SELECT max(n) FROM (SELECT count(DISTINCT item) n FROM t GROUP BY user_id)").fetchall()
    return int(d0)


# -- identical weights, counters and plans ------------------------------------------------------------
@pytest.mark.parametrize("name, users", [("movielens_100k", None), ("reddit_1pct_unigrams", None),
                                         ("imdb_unigrams", 300)])
def test_weights_identical_without_truncation(spark, name, users):
    """Basic's weights per key, exponents ½ (weighted Gaussian), 1 (Laplace) and 0 (counts), with Δ0 at
    the largest user's key count so no truncation is active: the same keys and weights (float sums
    in another order: 1e-12 relative)."""
    table = shared(name, users)
    d0 = max_keys_per_user(table)
    for exponent in (0.5, 1.0, 0.0):
        s, d = spark_weights(spark, table, d0, exponent), duckdb_weights(table, d0, exponent)
        assert s.keys() == d.keys()
        worst = max(abs(s[k] - d[k]) / d[k] for k in d)
        assert worst < 1e-12, (name, exponent, worst)


def test_mad_weights_template_on_spark_equals_duckdb(spark):
    """Spark runs MAD's DuckDB template (mechanisms/mad/sql/mad_weights.sql) through spark.sql: without
    truncation the same keys and weights as DuckDB (1e-12 relative), and its temp view is gone at close."""
    from duckdp.lifecycle import open_run
    from duckdp.mechanisms import get
    from duckdp.mechanisms.mad import duckdb as mad_duckdb
    from duckdp.mechanisms.mad import spark as mad_spark
    from duckdp.privacy.budget import EpsDelta

    table = shared("reddit_1pct_unigrams")
    d0 = max_keys_per_user(table)
    mech = get("mad")
    (plan,) = mech.plan(EpsDelta(1.0, 1e-5), Params(d0, mech.check_params({"max_adaptive_degree": 50})))
    stages = SparkStages(spark, spark_resolve(spark, spark.createDataFrame(table), "user_id", "item"), Randomness(1))
    try:
        vectors = mad_spark.mad_vectors(stages, stages.truncate(stages.sized(stages.pairs()), d0))
        w = mad_spark.mad_weights(stages, vectors, plan).toArrow()
    finally:
        stages.close()
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("_duckdp_")]
    s = dict(zip(w.column("_dp_k0").to_pylist(), w.column("_dp_w").to_pylist(), strict=True))
    con = duckdb.connect()
    con.register("t", table)
    with open_run(con, "t", "user_id", "item", Randomness(1)) as engine:
        vectors = mad_duckdb.mad_vectors(engine, engine.truncate(engine.sized(engine.pairs()), d0))
        q = mad_duckdb.mad_weights(engine, vectors, plan)
        d = dict(con.sql(q.sql, params=q.params).fetchall())
    assert s.keys() == d.keys() and plan.extra.tau < max(d.values())      # τ binds: stages 2–3 exercised
    assert max(abs(s[k] - d[k]) / d[k] for k in d) < 1e-12


def test_truncation_keeps_delta0_per_user(spark):
    """With truncation active each user keeps exactly min(|W_u|, Δ0) distinct keys, and the weights sum
    to Σ_u min(|W_u|, Δ0)^(1−e) on both engines (which keys are kept differs: engine-specific hashes)."""
    table = shared("movielens_100k")
    stages = SparkStages(spark, spark_resolve(spark, spark.createDataFrame(table), "user_id", "item"), Randomness(3))
    kept = stages.truncate(stages.sized(stages.pairs()), 20).toArrow()
    con = duckdb.connect()
    con.register("kept", kept)
    per_user = con.sql("SELECT _dp_user, count(*) c, count(DISTINCT _dp_k0) k, min(_dp_d) d "
                       "FROM kept GROUP BY 1").fetchall()
    assert all(c == k == d <= 20 for _, c, k, d in per_user)
    s, d = spark_weights(spark, table, 20, 0.5), duckdb_weights(table, 20, 0.5)
    assert math.isclose(sum(s.values()), sum(d.values()), rel_tol=1e-12)


def test_counters_match_duckdb(spark):
    """The PRF counters: integers as themselves, strings and composite keys as DuckDB's
    md5_number_upper/lower of the same length-prefixed encoding (per-key noise agrees across engines)."""
    rows = [(1, "a", -5), (2, "é☃", 7), (3, "", 2**62), (4, "x:y", -(2**63))]
    tbl = pa.table({"u": [r[0] for r in rows], "s": [r[1] for r in rows],
                    "i": pa.array([r[2] for r in rows], pa.int64())})
    df = spark.createDataFrame(tbl)
    hi, lo, collide = counters(df.withColumnRenamed("i", "_dp_k0"), ["_dp_k0"])
    got = df.withColumnRenamed("i", "_dp_k0").select(hi.alias("h"), lo.alias("l")).toArrow().to_pylist()
    assert not collide and got == [{"h": -1 if v < 0 else 0, "l": v} for _, _, v in rows]
    for cols in (["s"], ["s", "i"]):
        frame = df.select(*[df[c].alias(f"_dp_k{j}") for j, c in enumerate(cols)])
        hi, lo, collide = counters(frame, frame.columns)
        got = frame.select(hi.alias("h"), lo.alias("l")).toArrow().to_pylist()
        enc = ", ".join(f"strlen(CAST({c} AS VARCHAR))::VARCHAR, ':', CAST({c} AS VARCHAR)" for c in cols)
        con = duckdb.connect()
        con.register("tbl", tbl)
        want = con.sql(f"SELECT md5_number_upper(concat({enc}))::HUGEINT, md5_number_lower(concat({enc}))::HUGEINT "
                          f"FROM tbl").fetchall()
        signed = [(h - 2**64 if h >= 2**63 else h, lo_ - 2**64 if lo_ >= 2**63 else lo_) for h, lo_ in want]
        assert collide and [(g["h"], g["l"]) for g in got] == signed


ALGOS = ["weighted_gaussian", "weighted_laplace", "count_gaussian", "count_laplace", "truncated_geometric",
         "dpsips", "adaptive_sips", "mad", "mad2r"]


@pytest.mark.slow
def test_every_mechanism_same_plan_and_report(spark):
    """σ/λ and T of every round are the plan's on both engines; the report and Arrow output work."""
    table = shared("reddit_1pct_unigrams", 400)
    df, con = spark.createDataFrame(table), duckdb.connect()
    for algo in ALGOS:
        s = duckdp.select(spark, df, algo=algo, epsilon=2, delta=1e-5, max_contributions=10, seed=4)
        d = duckdp.select(con, table, algo=algo, epsilon=2, delta=1e-5, max_contributions=10, seed=4)
        plan_of = [(r.sigma, r.threshold, r.budget) for r in s.rounds]
        assert plan_of == [(r.sigma, r.threshold, r.budget) for r in d.rounds]
        assert s.to_arrow().column_names == ["item"] and s.items.count() == len(s) == s.to_arrow().num_rows
        assert s.report().splitlines()[0] == f"duckdp release — {algo}"


def replicated_keys(levels: list[int], copies: int) -> pa.Table:
    """`copies` independent keys per level n, each held by n single-key users."""
    users, items, uid = [], [], 0
    for n in levels:
        for c in range(copies):
            for _ in range(n):
                users.append(uid)
                items.append(f"n{n}|{c}")
                uid += 1
    return pa.table({"user_id": pa.array(users, pa.int64()), "item": items})


@pytest.mark.parametrize("algo", ["weighted_gaussian", pytest.param("dpsips", marks=pytest.mark.slow),
                                  pytest.param("adaptive_sips", marks=pytest.mark.slow),
                                  pytest.param("mad2r", marks=pytest.mark.slow)])
def test_released_counts_statistically_equal(spark, algo):
    """Per level n (keys held by n single-key users, near the threshold), the number of released keys of
    1,500 independent keys on each engine: Binomial, equal expectation; |Δ| within 4 standard errors."""
    levels = [4, 6, 8, 10]
    table = replicated_keys(levels, 1500)
    s = duckdp.select(spark, spark.createDataFrame(table), algo=algo, epsilon=1, delta=1e-3, max_contributions=2,
                      seed=11)
    d = duckdp.select(duckdb.connect(), table, algo=algo, epsilon=1, delta=1e-3, max_contributions=2, seed=12)

    def per_level(rel):
        names = rel.to_arrow().column("item").to_pylist()
        return {n: sum(k.startswith(f"n{n}|") for k in names) for n in levels}
    sc, dc = per_level(s), per_level(d)
    assert 0 < sum(sc.values()) < len(levels) * 1500          # the levels straddle the threshold
    for n in levels:
        ps, pd_ = sc[n] / 1500, dc[n] / 1500
        se = math.sqrt((ps * (1 - ps) + pd_ * (1 - pd_)) / 1500) or 1 / 1500
        assert abs(ps - pd_) <= 4 * se, (algo, n, sc[n], dc[n])


def test_seeded_spark_release_is_reproducible(spark):
    table = shared("reddit_1pct_unigrams", 400)
    df = spark.createDataFrame(table)
    a = duckdp.select(spark, df, algo="dpsips", epsilon=1, delta=1e-6, max_contributions=30, seed=9).to_arrow()
    b = duckdp.select(spark, df, algo="dpsips", epsilon=1, delta=1e-6, max_contributions=30, seed=9).to_arrow()
    assert sorted(a.column(0).to_pylist()) == sorted(b.column(0).to_pylist())


def test_same_keys_as_duckdb_for_the_same_seed(spark):
    """Same seed, no truncation active: the same noise per key on both engines, hence the same keys."""
    table = shared("movielens_100k")
    d0 = max_keys_per_user(table)
    for algo in ("weighted_gaussian", "count_laplace"):
        s = duckdp.select(spark, spark.createDataFrame(table), algo=algo, epsilon=1, delta=1e-6,
                          max_contributions=d0, seed=5)
        d = duckdp.select(duckdb.connect(), table, algo=algo, epsilon=1, delta=1e-6, max_contributions=d0, seed=5)
        assert sorted(s.to_arrow().column(0).to_pylist()) == sorted(d.to_arrow().column(0).to_pylist())


def test_own_stages_same_keys_as_duckdb_for_the_same_seed(spark):
    """The mechanism folders' own stages (MAD/MAD2R, adaptive SIPS: templates run by spark.sql, the
    `decide` rule on the executors) agree with DuckDB's: same seed, no truncation active, the same
    released keys round by round."""
    table = shared("reddit_1pct_unigrams", 400)
    d0 = max_keys_per_user(table)
    for algo in ("mad", "mad2r", "adaptive_sips"):
        s = duckdp.select(spark, spark.createDataFrame(table), algo=algo, rho=0.5, delta=1e-6,
                          max_contributions=d0, seed=7)
        d = duckdp.select(duckdb.connect(), table, algo=algo, rho=0.5, delta=1e-6, max_contributions=d0, seed=7)
        assert s.to_arrow().column(0).to_pylist() == d.to_arrow().column(0).to_pylist(), algo
        assert [r.released for r in s.rounds] == [r.released for r in d.rounds], algo
        assert len(d) > 0, algo


def test_neighbours_list_released_keys_identically(spark):
    """Issue 18 §1 on Spark: 100 keys held by 60 users each (rows shuffled) and a neighbour with one more
    user holding k050 and 50 keys of its own. Spark's partitioning orders keys by hash; the release must
    list them by key (DataFrame, to_arrow() in one chunk, count release), hence identically on both sides
    (checked for DP-SIPS; the other families on the neighbour only, to keep Spark's job count small)."""
    keys = np.random.default_rng(7).permutation(np.repeat([f"k{i:03d}" for i in range(100)], 60))
    d = pa.table({"user_id": np.arange(keys.size, dtype=np.int64), "item": keys})
    extra = pa.table({"user_id": np.full(51, -1, dtype=np.int64), "item": ["k050"] + [f"x{i:02d}" for i in range(50)]})
    frames = [spark.createDataFrame(d), spark.createDataFrame(pa.concat_tables([extra, d]))]
    runs = {algo: lambda df, algo=algo: duckdp.select(spark, df, algo=algo, epsilon=1, delta=1e-5,
                                                      max_contributions=1, seed=3)
            for algo in ("weighted_gaussian", "dpsips", "adaptive_sips", "mad", "mad2r", "truncated_geometric")}
    runs["pcr"] = lambda df: duckdp.count_release(spark, df, rho=2.0, delta=1e-5, seed=3, initial_epsilon=0.5)
    for algo, run in runs.items():
        listed = []
        for df in frames if algo == "dpsips" else frames[1:]:
            r = run(df)
            rows = [row["item"] for row in r.items.collect()]
            assert rows == sorted(rows) and len(rows) >= 5, algo
            assert r.to_arrow().column("item").to_pylist() == rows and r.to_arrow().column(0).num_chunks == 1
            listed.append(rows)
        if len(listed) == 2 and set(listed[0]) == set(listed[1]):
            assert listed[0] == listed[1], algo


# -- count release, Session, errors --------------------------------------------------------------------
def test_count_release_matches_duckdb(spark):
    """Distinct counts (no ties): the same cached top list, hence the same seeded release on both engines."""
    users, items = [], []
    for k in range(40):
        users += list(range(50 * (k + 1)))
        items += [f"k{k}"] * (50 * (k + 1))
    table = pa.table({"user_id": pa.array(users, pa.int64()), "item": items})
    s = duckdp.count_release(spark, spark.createDataFrame(table), rho=0.5, delta=1e-6, seed=2, kbar=20)
    d = duckdp.count_release(duckdb.connect(), table, rho=0.5, delta=1e-6, seed=2, kbar=20)
    assert s.to_arrow().equals(d.to_arrow()) and s.items.count() == len(d)


def test_session_charges_spark_releases(spark):
    table = shared("movielens_100k")
    df = spark.createDataFrame(table)
    session = duckdp.Session(spark, epsilon=1.0, delta=1e-5)
    session.select(df, algo="weighted_gaussian", epsilon=0.6, delta=5e-6, max_contributions=10)
    twin = duckdp.Session(duckdb.connect(), epsilon=1.0, delta=1e-5)      # the same accounting on DuckDB
    twin.select(table, algo="weighted_gaussian", epsilon=0.6, delta=5e-6, max_contributions=10)
    assert 0 < session.spent.value == pytest.approx(twin.spent.value, rel=1e-12)
    with pytest.raises(duckdp.BudgetExceeded):      # a second release at the whole ε cannot fit
        session.select(df, algo="weighted_gaussian", epsilon=1.0, delta=5e-6, max_contributions=10)
    with pytest.raises(InvalidParameter, match="ledger_table"):
        duckdp.Session(spark, epsilon=1.0, delta=1e-5, ledger_table="ledger")


def test_errors(spark):
    df = spark.createDataFrame(pa.table({"user_id": pa.array([1, None], pa.int64()), "item": ["a", "b"]}))
    with pytest.raises(InvalidParameter, match="only on DuckDB"):
        duckdp.select(spark, df, algo="policy_gaussian", epsilon=1, delta=1e-6)
    with pytest.raises(SchemaError, match="nope"):
        duckdp.select(spark, df, algo="dpsips", epsilon=1, delta=1e-6, item_col="nope")
    with pytest.raises(SchemaError, match="no table"):
        duckdp.select(spark, "no_such_table", algo="dpsips", epsilon=1, delta=1e-6)
    with pytest.raises(DataError, match="1 row"):
        duckdp.select(spark, df, algo="dpsips", epsilon=1, delta=1e-6)
    df.createOrReplaceTempView("spark_named")
    with pytest.raises(DataError):
        duckdp.select(spark, "spark_named", algo="mad", epsilon=1, delta=1e-6)


# -- privacy audits on the Spark path (tests/test_audits.py's scenarios and decision rule) ----------------
@pytest.mark.slow
@pytest.mark.parametrize("algo", ["weighted_gaussian", "dpsips"])
@pytest.mark.parametrize("scenario", ["A", "B"])
def test_audit_on_spark(spark, monkeypatch, algo, scenario):
    """Scenario A (a novel user, k = 1 and Δ0 = 4 keys) and B (a user just under the threshold) as in
    test_audits.py, with the replicas of several runs in one Spark run; the plan's deliberately
    broken variant (halved threshold / doubled weight) must fail the same audit."""
    import test_audits as ta

    if scenario == "A":
        kw, d0, (comps, groups) = ta.BUDGET_A, 4, ta.scenario_novel(4, 2000)
        events, broken = ["novel"], ta.halved_threshold
    else:
        reps = 12000 if algo == "dpsips" else 6000
        kw, d0, (comps, groups) = ta.BUDGET_B, 1, ta.scenario_under(ta.UNDER, reps)
        events, broken = ["I"], ta.doubled_weight
    con = duckdb.connect()
    ta.make_table(con, comps)
    spark.createDataFrame(con.sql("SELECT * FROM aud").to_arrow_table()).createOrReplaceTempView("aud")
    replicas = {(g, v): len({c[2] for c in comps if c[0] == v and c[1] == g}) for v, g, _, _ in comps}

    def audit(seed):
        """One Spark release over all replicas; tally components where each event happened (run_audit)."""
        rel = duckdp.select(spark, "aud", algo=algo, max_contributions=d0, seed=seed, **kw)
        hits, seen = defaultdict(int), set()
        for key in rel.to_arrow().column(0).to_pylist():
            v, g, r, name = key.split("|")
            seen |= {(e, int(g), v, r) for e in events if ta.EVENTS[e](name)}
        for e, g, v, _ in seen:
            hits[(e, g, v)] += 1
        spent = ta.claimed(algo, kw, d0)
        return spent, ta.verdict(hits, replicas, groups, events, 1, spent)

    spent, (est, lo, label) = audit(1000)
    with monkeypatch.context() as m:
        ta.break_plan(m, algo, broken)
        _, (b_est, b_lo, b_label) = audit(5000)
    print(f"\nSPARK AUDIT {algo} {scenario} {label}: δ̂={est:+.4f} δ_lo={lo:+.4f} allowed δ={spent.delta:.4f} | "
          f"{broken.__name__}: δ̂={b_est:+.4f} δ_lo={b_lo:+.4f} ({b_label})")
    assert lo <= spent.delta, f"{algo} {scenario} on Spark: privacy violation shown for {label}"
    assert b_lo > spent.delta, f"{algo} {scenario} on Spark: the audit cannot tell the {broken.__name__} variant"


_NO_DUCKDP = """
from pyspark.sql import SparkSession
import duckdp
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
df = spark.range(300).selectExpr("id AS user_id", "concat('w', id % 3) AS item")     # no Python worker yet
print(len(duckdp.select(spark, df, algo="weighted_gaussian", rho=1.0, delta=1e-6, max_contributions=1, seed=1)))
"""


def test_local_workers_default_to_the_driver_python(tmp_path):
    """A venv used without activating it: PATH's `python3` has no duckdp (here: no pyspark either).
    Workers must run this interpreter unless PYSPARK_PYTHON says otherwise."""
    import subprocess
    import sys

    fake = tmp_path / "python3"
    fake.write_text(f"#!/bin/sh\nexec {sys._base_executable} -I \"$@\"\n")    # a Python without duckdp
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = f"{tmp_path}:{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, "-c", _NO_DUCKDP], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) == 3


def test_executor_without_duckdp_is_one_clear_error():
    from duckdp.spark import missing_duckdp

    trace = "org.apache.spark.api.python.PythonException: ... ModuleNotFoundError: No module named 'duckdp'\n" * 40
    err = missing_duckdp(RuntimeError(trace))
    assert err is not None and "cannot import duckdp" in str(err) and "PYSPARK_PYTHON" in str(err)
    assert "\n" not in str(err)
    assert missing_duckdp(RuntimeError("some other failure")) is None


def _plan(df) -> str:
    """The physical plan `df` ran (its adaptive plan's final form: AQE turns joins into broadcasts at run time)."""
    df.collect()
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_runs_plan_no_automatic_broadcasts_and_restore_the_session(spark):
    """A run's joins are not broadcast automatically (on a local master every broadcast stays deserialized in the
    driver's heap until a GC: RESULTS.md "Spark driver memory across releases (stop 32)"), and the user's session
    comes back as it was: thresholds unset stay unset, set ones keep their value, after an error and a release too,
    and nested runs restore only when the last one closes; no stored frame is left persisted."""
    from duckdp.spark.lifecycle import BROADCAST_CONFS, open_run

    threshold, adaptive = BROADCAST_CONFS
    df = spark.createDataFrame([(u, f"k{u % 7}") for u in range(60)], "user_id long, item string")
    small = spark.createDataFrame([("k1",), ("k2",)], "item string")
    joined = df.join(small, "item", "left_anti")
    assert "BroadcastHashJoin" in _plan(joined)            # Spark's default here: a broadcast (the test can fail)
    assert not {threshold, adaptive} & set(spark.conf.getAll)
    persisted = len(spark.sparkContext._jsc.getPersistentRDDs())
    with open_run(spark, df, "user_id", "item") as stages:
        assert stages.store(stages.pairs()).count() == 60
        keys = small.withColumnRenamed("item", "_dp_k0")
        assert "BroadcastHashJoin" not in _plan(stages.remove(stages.pairs(), keys))
        assert spark.conf.get(threshold) == spark.conf.get(adaptive) == "-1"
        with open_run(spark, df, "user_id", "item"):       # a second run open at once (another thread's)
            pass
        assert spark.conf.get(threshold) == "-1"
    assert not {threshold, adaptive} & set(spark.conf.getAll)       # unset again, not set to the default's value
    spark.conf.set(threshold, "20MB")
    try:
        with pytest.raises(RuntimeError, match="inside"), open_run(spark, df, "user_id", "item"):
            assert spark.conf.get(threshold) == "-1"
            raise RuntimeError("failed inside a run")
        assert spark.conf.getAll.get(threshold) == "20MB" and adaptive not in spark.conf.getAll
        duckdp.select(spark, df, algo="weighted_gaussian", rho=0.5, delta=1e-6, max_contributions=2, seed=1)
        assert spark.conf.getAll.get(threshold) == "20MB" and adaptive not in spark.conf.getAll
        assert len(spark.sparkContext._jsc.getPersistentRDDs()) == persisted
    finally:
        spark.conf.unset(threshold)


def test_cluster_sessions_keep_their_broadcast_settings():
    """On a non-local master (or Spark Connect, no SparkContext) a run leaves the session's conf untouched."""
    from types import SimpleNamespace

    from duckdp.spark.lifecycle import no_auto_broadcast

    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"conf.{name} used on a cluster session")

    class Connect:
        conf = Untouchable()

        @property
        def sparkContext(self):
            raise RuntimeError("no SparkContext on Spark Connect")

    for session in (SimpleNamespace(sparkContext=SimpleNamespace(master="yarn"), conf=Untouchable()), Connect()):
        with no_auto_broadcast(session):
            pass


def test_float_keys_released_in_one_form_on_spark(spark):
    """tests/test_order.py's neighbour pair (D' adds a user, rows first, holding −0.0 and another NaN): Spark
    releases 0.0 and the one NaN on both sides too (its grouping normalises floats), with a selection and with a
    public key set given in both forms."""
    from tests.test_order import _CANONICAL, _float_neighbours, _forms

    allowed = {_CANONICAL["zero"], _CANONICAL["nan"], np.float64(1.0).tobytes()}
    for table in _float_neighbours():
        df = spark.createDataFrame(table)
        for out in (duckdp.select(spark, df, algo="weighted_gaussian", epsilon=5, delta=1e-6, seed=1).to_arrow(),
                    duckdp.aggregate(spark, df, by="item", metrics={"n": "users"}, keys=[0.0, -0.0, float("nan")],
                                     epsilon=5, delta=1e-6, seed=1).to_arrow()):
            assert set(_forms(out)) <= allowed and len(_forms(out)) == len(set(_forms(out)))


def test_collated_string_keys_grouped_byte_by_byte_on_spark(spark):
    """tests/test_order.py's collation neighbour pair on Spark 4 (`string collate UTF8_LCASE`): D = 400 users holding
    'a', D' adds one user holding 'A' — both release exactly ['a'] (before: one case-insensitive group, showing a
    form its rows chose), and a public key set ['a', 'A'] lists both keys."""
    from pyspark.sql import functions as F

    for rows in ([(i, "a") for i in range(400)], [(10**6, "A")] + [(i, "a") for i in range(400)]):
        df = spark.createDataFrame(rows, "user_id long, item string").withColumn(
            "item", F.col("item").cast("string collate UTF8_LCASE"))
        assert duckdp.select(spark, df, algo="weighted_gaussian", epsilon=5, delta=1e-6, seed=1).to_arrow() \
            .column(0).to_pylist() == ["a"]
        assert duckdp.aggregate(spark, df, by="item", metrics={"n": "users"}, keys=["a", "A"], epsilon=5, delta=1e-6,
                                seed=1).to_arrow().column("item").to_pylist() == ["A", "a"]
