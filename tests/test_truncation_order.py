"""truncation="global": every user over Δ0 keeps the Δ0 keys of smallest keyed hash of the KEY (one secret
order of the keys, fresh per truncation) instead of the default per-user order of (user, key).

Checked here on DuckDB (Spark and the reference engine: the stage contract, tests/contract_stages.py):
the kept set is one order's first Δ0 keys for every user (in one query and in user-hash passes); the
ℓ2 sensitivity of the weights is unchanged (a neighbour pair, with the power shown by a data-dependent
order that breaks it); select() and aggregate() release at most Δ0 keys per round where every user holds
the same keys; the option is validated before any budget is charged; the CLI passes it on.
"""
from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from graphlib import TopologicalSorter

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import duckdp
from duckdp import cli
from duckdp.errors import InvalidParameter
from duckdp.lifecycle import open_run
from duckdp.mechanisms.basic import basic_weights
from duckdp.rng import Randomness
from duckdp.stages import duckdb as stages_duckdb
from duckdp.stages.duckdb import BYTES_PER_ROW_PASS

TRUNCATING = ["weighted_gaussian", "weighted_laplace", "count_gaussian", "dpsips", "adaptive_sips", "mad", "mad2r",
              "policy_gaussian", "truncated_geometric"]


def kept_pairs(con, table, truncation: str, max_contributions: int, seed: int = 5) -> dict:
    """user → the keys the engine's truncation keeps (seeded: the same salt for the same seed)."""
    with open_run(con, table, "user_id", "item", Randomness(seed), truncation=truncation) as stages:
        frame = stages.truncate(stages.sized(stages.pairs()), max_contributions)
        rows = con.execute(f"SELECT _dp_user, _dp_k0 FROM ({frame.sql})", frame.params).fetchall()
    kept: dict = defaultdict(set)
    for u, k in rows:
        kept[u].add(k)
    return dict(kept)


def one_order(held: dict, kept: dict) -> bool:
    """Whether one order of the keys makes every user's kept keys the first of its own (no cycle in
    "kept before dropped")."""
    after: dict = defaultdict(set)
    for u, keys in held.items():
        for dropped in keys - kept.get(u, set()):
            after[dropped] |= kept.get(u, set())
    try:
        tuple(TopologicalSorter(after).static_order())
    except Exception:
        return False
    return True


@pytest.fixture
def overlapping():
    """120 users holding 8–30 of 60 keys (random subsets): truncation to Δ0 = 5 binds for all."""
    rng = np.random.default_rng(3)
    users, items = [], []
    for u in range(120):
        ks = rng.choice(60, size=int(rng.integers(8, 31)), replace=False)
        users += [u] * len(ks)
        items += [int(k) for k in ks]
    return pa.table({"user_id": pa.array(users, pa.int64()), "item": pa.array(items, pa.int64())})


def held_keys(table: pa.Table) -> dict:
    held: dict = defaultdict(set)
    for u, k in zip(table.column("user_id").to_pylist(), table.column("item").to_pylist(), strict=True):
        held[u].add(k)
    return dict(held)


@pytest.mark.parametrize("passes", [1, 3])
def test_global_keeps_the_first_keys_of_one_order_for_every_user(overlapping, monkeypatch, passes):
    """The kept set: Δ0 of the user's own keys, the first in ONE order for every user (in one query and in
    user-hash passes, the same set); per_user orders are independent across users (cycles)."""
    con = duckdb.connect()
    if passes > 1:
        monkeypatch.setattr(stages_duckdb, "memory_limit_bytes",
                            lambda c: overlapping.num_rows * BYTES_PER_ROW_PASS / passes)
    held = held_keys(overlapping)
    kept = kept_pairs(con, overlapping, "global", 5)
    assert sorted(kept) == sorted(held)
    assert all(kept[u] <= held[u] and len(kept[u]) == 5 for u in held)
    assert one_order(held, kept)
    assert not one_order(held, kept_pairs(con, overlapping, "per_user", 5))
    if passes > 1:
        monkeypatch.undo()
        assert kept == kept_pairs(con, overlapping, "global", 5)
    assert kept != kept_pairs(con, overlapping, "global", 5, seed=6)       # the order is keyed (another salt)


def weights_of(kept: dict, sizes: dict, max_contributions: int) -> dict:
    """Σ_u d_u^(−½) per key over the users who kept it (d_u = min(|W_u|, Δ0)): Weighted Gaussian's vector."""
    w: dict = defaultdict(float)
    for u, keys in kept.items():
        for k in keys:
            w[k] += min(sizes[u], max_contributions) ** -0.5
    return w


def l2_change(w: dict, w2: dict) -> tuple[float, set]:
    keys = set(w) | set(w2)
    moved = {k for k in keys if not math.isclose(w.get(k, 0.0), w2.get(k, 0.0), abs_tol=1e-12)}
    return math.sqrt(sum((w.get(k, 0.0) - w2.get(k, 0.0)) ** 2 for k in keys)), moved


def neighbours() -> tuple[pa.Table, pa.Table]:
    """D: 40 users each holding keys 0..9 (all tied in popularity); D' = D + one user holding 5..14."""
    d = pa.table({"user_id": pa.array(np.repeat(np.arange(40), 10), pa.int64()),
                  "item": pa.array(np.tile(np.arange(10), 40), pa.int64())})
    extra = pa.table({"user_id": pa.array([999] * 10, pa.int64()), "item": pa.array(range(5, 15), pa.int64())})
    return d, pa.concat_tables([d, extra])


def by_popularity(held: dict, max_contributions: int) -> dict:
    """A deliberately broken 'global' order: the most popular keys first (popularity read from every user)."""
    count: dict = defaultdict(int)
    for keys in held.values():
        for k in keys:
            count[k] += 1
    return {u: set(sorted(keys, key=lambda k: (-count[k], k))[:max_contributions]) for u, keys in held.items()}


@pytest.mark.parametrize("truncation", ["per_user", "global"])
def test_l2_sensitivity_is_unchanged_on_a_neighbour_pair(truncation):
    """Adding one user (same seed, so the same secret salt) moves only that user's Δ0 kept keys, by 1/√Δ0 each:
    ‖w(D') − w(D)‖₂ = 1 under either order, the bound every mechanism's σ is calibrated to."""
    con = duckdb.connect()
    d, d2 = neighbours()
    kept, kept2 = kept_pairs(con, d, truncation, 5), kept_pairs(con, d2, truncation, 5)
    assert {u: kept2[u] for u in kept} == kept                          # other users keep what they kept
    sizes = {u: len(ks) for u, ks in held_keys(d2).items()}
    change, moved = l2_change(weights_of(kept, sizes, 5), weights_of(kept2, sizes, 5))
    assert moved == kept2[999] and len(moved) == 5
    assert change == pytest.approx(1.0)
    # the engine's own weights stage agrees with the vector the audit reads
    with open_run(con, d2, "user_id", "item", Randomness(5), truncation=truncation) as stages:
        q = basic_weights(stages, 5, 0.5)
        engine = dict(con.execute(f"SELECT _dp_k0, _dp_w FROM ({q.sql})", q.params).fetchall())
    assert engine == pytest.approx(dict(weights_of(kept2, sizes, 5)))


def test_the_audit_catches_an_order_that_reads_other_users():
    """Power: an order by popularity is 'one order for everyone' too, but a function of other users' data —
    the added user flips every other user's kept keys and the change is far above 1."""
    d, d2 = neighbours()
    held, held2 = held_keys(d), held_keys(d2)
    kept, kept2 = by_popularity(held, 5), by_popularity(held2, 5)
    sizes = {u: len(ks) for u, ks in held2.items()}
    change, moved = l2_change(weights_of(kept, sizes, 5), weights_of(kept2, sizes, 5))
    assert change > 10 and len(moved) > 5


@pytest.fixture
def same_keys():
    """300 users, each holding the same 40 keys."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT u AS user_id, k AS item FROM range(300) a(u), range(40) b(k)")
    return con


@pytest.mark.parametrize("algo", TRUNCATING)
def test_select_global_releases_at_most_delta0_keys_per_round(same_keys, algo):
    """Where every user holds the same keys, a global order keeps the same Δ0 for everyone: a round can release
    at most those Δ0 (per_user orders spread the users over all 40 keys, so a round releases more)."""
    budget = ({"epsilon": 4.0, "delta": 1e-5} if algo in ("weighted_laplace", "truncated_geometric")
              else {"rho": 4.0, "delta": 1e-5})
    r = duckdp.select(same_keys, "t", algo=algo, max_contributions=4, seed=1, truncation="global", **budget)
    assert r.truncation == "global" and "one global key order" in r.report()
    assert 1 <= len(r) and all(x.released <= 4 for x in r.rounds)
    first = duckdp.select(same_keys, "t", algo=algo, max_contributions=4, seed=1, **budget)
    assert first.truncation == "per_user" and first.rounds[0].released > 4


def test_aggregate_global_threshold_counts_every_user_of_the_kept_keys(same_keys):
    """keys="threshold" with a global order: the Δ0 keys every user kept, each with its full 300 users (± noise)."""
    agg = duckdp.aggregate(same_keys, "t", by="item", metrics={"n": "users"}, keys="threshold", rho=8.0, delta=1e-5,
                           max_contributions=4, seed=2, truncation="global")
    out = agg.to_arrow()
    assert out.num_rows == 4 and agg.truncation == "global" and "one global key order" in agg.report()
    sigma = agg.plan.threshold.sigma
    assert all(abs(n - 300) <= 6 * sigma for n in out.column("n").to_pylist())


@pytest.mark.parametrize("value", ["Global", "per-user", None, 1, True])
def test_truncation_is_validated_before_any_charge(same_keys, value):
    session = duckdp.Session(same_keys, rho=10.0, delta=1e-4)
    with pytest.raises(InvalidParameter, match="truncation must be one of 'per_user', 'global'"):
        session.select("t", algo="dpsips", rho=1.0, delta=1e-5, truncation=value)
    with pytest.raises(InvalidParameter, match="truncation must be one of 'per_user', 'global'"):
        session.aggregate("t", by="item", metrics={"n": "users"}, rho=1.0, delta=1e-5, truncation=value)
    assert session.events == []


def test_global_is_refused_where_no_user_is_truncated(same_keys):
    with pytest.raises(InvalidParameter, match="gw does not bound users to Δ0 keys; truncation='global'"):
        duckdp.select(same_keys, "t", algo="gw", epsilon=1.0, delta=1e-5, allow_unproven=True, truncation="global")


def test_cli_passes_truncation_on(tmp_path, same_keys):
    same_keys.execute(f"COPY t TO '{tmp_path / 'in.parquet'}' (FORMAT PARQUET)")
    out = tmp_path / "out.parquet"
    args = ["select", str(tmp_path / "in.parquet"), "--algo", "weighted_gaussian", "--rho", "4", "--delta", "1e-5",
            "--max-contributions", "4", "--seed", "1", "-o", str(out)]
    assert cli.main([*args, "--truncation", "global"]) == 0
    assert duckdb.sql(f"SELECT count(*) FROM '{out}'").fetchall()[0][0] <= 4
    assert cli.main([*args, "--truncation", "per_user"]) == 0
    assert duckdb.sql(f"SELECT count(*) FROM '{out}'").fetchall()[0][0] > 4
    with pytest.raises(SystemExit):
        cli.main([*args, "--truncation", "sideways"])


def test_cli_json_states_the_order(tmp_path, same_keys, capsys):
    """aggregate's default is global, select's per_user; --json says which order ran."""
    same_keys.execute(f"COPY t TO '{tmp_path / 'in.parquet'}' (FORMAT PARQUET)")
    common = [str(tmp_path / "in.parquet"), "--rho", "4", "--delta", "1e-5", "--max-contributions", "4", "--seed", "1",
              "-o", str(tmp_path / "out.parquet"), "--json"]
    runs = [["select", *common], ["aggregate", *common, "--by", "item", "--metric", "n=users", "--keys", "threshold"],
            ["aggregate", *common, "--by", "item", "--metric", "n=users", "--keys", "threshold",
             "--truncation", "per_user"]]
    seen = []
    for args in runs:
        assert cli.main(args) == 0
        seen.append(json.loads(capsys.readouterr().out)["truncation"])
    assert seen == ["per_user", "global", "per_user"]


@pytest.fixture
def spark_session(request):
    """The shared local[2] SparkSession (tests/conftest.py), or a skip without pyspark or Java."""
    pytest.importorskip("pyspark", reason="pyspark not installed (pip install 'duckdp[spark]')")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime on PATH (Spark needs Java 17+)")
    return request.getfixturevalue("spark")


@pytest.mark.spark
def test_spark_select_and_aggregate_take_global(spark_session):
    """On Spark the option reaches the truncation of select() and aggregate() (the stage itself: the contract)."""
    spark = spark_session
    table = duckdb.sql("SELECT u AS user_id, k AS item FROM range(300) a(u), range(40) b(k)").to_arrow_table()
    df = spark.createDataFrame(table)
    kw = {"rho": 4.0, "delta": 1e-5, "max_contributions": 4, "seed": 1}
    r = duckdp.select(spark, df, algo="dpsips", truncation="global", **kw)
    assert r.truncation == "global" and 1 <= len(r) and all(x.released <= 4 for x in r.rounds)
    assert duckdp.select(spark, df, algo="dpsips", **kw).rounds[0].released > 4
    agg = duckdp.aggregate(spark, df, by="item", metrics={"n": "users"}, keys="threshold", truncation="global",
                           **kw | {"rho": 8.0})
    assert len(agg) == 4 and agg.truncation == "global"
