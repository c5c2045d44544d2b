"""duckdp.aggregate on DuckDB (docs/specs/private-group-by.md): listing, public keys, grid exactness, σ from
the plan, reproducibility, accounting, input errors before any read, coverage, and an engine sensitivity
audit whose broken variants (no row cap, no clipping) are caught."""
from __future__ import annotations

import dataclasses
import math
import threading
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

import duckdp
from duckdp import aggregate_noise, cli, draw_pool, group_by
from duckdp.aggregate_noise import collision_ranks, counters
from duckdp.errors import BudgetExceeded, InternalError, InvalidParameter, SchemaError
from duckdp.lifecycle import open_run
from duckdp.mechanisms.aggregate import duckdb as stages_sql
from duckdp.mechanisms.aggregate import pre_thresholded_selection
from duckdp.mechanisms.base import Params
from duckdp.privacy.aggregate import THRESHOLD_TAG, Metric, finish, finish_mean, plan_aggregate
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.rng import Randomness
from duckdp.run import RunContext
from duckdp.stages import Query
from duckdp.stages.duckdb import DuckDBStages
from tests.conftest import leftovers
from tests.reference_aggregate import bounded_measures
from tests.test_order import neighbours

METRICS = {"raters": "users", "ratings": "count", "stars": ("sum", "rating", 1, 5), "avg": ("mean", "rating", 1, 5)}


def ratings(n_users: int = 300, n_keys: int = 40, seed: int = 0) -> pa.Table:
    """Each user rates a random subset of keys once (no bound binds at Δ0 ≥ n_keys, m = 1), values 1..5."""
    rng = np.random.default_rng(seed)
    users, items, values = [], [], []
    for u in range(n_users):
        ks = rng.choice(n_keys, size=rng.integers(1, min(8, n_keys + 1)), replace=False)
        users += [u] * len(ks)
        items += [f"k{k:03d}" for k in ks]
        values += list(rng.integers(1, 6, size=len(ks)))
    return pa.table({"user_id": pa.array(users, pa.int64()), "item": items, "rating": pa.array(values, pa.int64())})


def run(con, table, **kw):
    args = {"by": "item", "metrics": METRICS, "rho": 0.5, "delta": 1e-6, "max_contributions": 50, "seed": 1} | kw
    return duckdp.aggregate(con, table, **args)


def poisoned(con, table: pa.Table) -> str:
    """A view over `table` whose rows raise when read (its schema reads fine): proves nothing was read."""
    con.register("_src", table)
    con.execute("CREATE VIEW poisoned AS SELECT user_id, item, "
                "CASE WHEN user_id >= 0 THEN error('data was read') END::BIGINT AS rating FROM _src")
    return "poisoned"


# ---------------------------------------------------------------- exact noise drawn while the engine sums

@pytest.mark.parametrize("seed", [1, None])
@pytest.mark.parametrize("keys", ["dpsips", ["k001", "k002", "k007"]])
def test_noise_drawn_early_is_the_noise_of_the_measures_counters(con, monkeypatch, keys, seed):
    """group_by draws each measure's exact noise from `counters` (agg_counters.sql) while the engine sums, and
    checks the measures' own counters equal them: seeded, the release equals the one drawn after the sums from
    the measures' counters (the noise of the counters the numbers belong to); counters that differ (here: one
    key's shifted, so its noise would belong to another counter) are refused, not released."""
    con.register("ratings", ratings())
    first = run(con, "ratings", keys=keys, seed=seed).to_arrow()
    if seed is not None:
        monkeypatch.setattr(group_by, "ThreadPoolExecutor", _SerialAfterSums)
        assert run(con, "ratings", keys=keys, seed=seed).to_arrow().equals(first)
        monkeypatch.undo()
    real = stages_sql.counters

    def shifted(engine, frame):
        table = real(engine, frame)
        lo = table.column("_dp_clo").to_numpy().copy()
        lo[-1] += 1
        return table.set_column(1, "_dp_clo", pa.array(lo, pa.uint64()))

    monkeypatch.setattr(stages_sql, "counters", shifted)
    with pytest.raises(InternalError, match="counters"):
        run(con, "ratings", keys=keys, seed=seed)


def test_failed_sums_stop_the_exact_noise(con, monkeypatch):
    """When the engine's sums fail (or Ctrl-C interrupts them), the draws running beside them stop at their next
    chunk instead of finishing every draw of the key set (group_by._exact_noise): here the worker waits for the
    failure before its first chunk, and must return nothing; the call raises the engine's error."""
    con.register("ratings", ratings())
    real, seen = group_by._exact_noise, []

    def waiting(randomness, plan, hi, lo, stop, pool):
        assert stop.wait(timeout=60)
        seen.append(real(randomness, plan, hi, lo, stop, pool))
        return seen[-1]

    def failing(*args):
        raise RuntimeError("the engine failed")

    monkeypatch.setattr(group_by, "_exact_noise", waiting)
    monkeypatch.setattr(stages_sql, "key_measures", failing)
    with pytest.raises(RuntimeError, match="the engine failed"):
        run(con, "ratings", keys=["k001", "k002"])
    assert seen == [None]


@pytest.mark.parametrize("chunk", [1, 2, 4096])
@pytest.mark.parametrize("workers", [1, 2])
def test_exact_noise_in_chunks_is_the_same_draws(monkeypatch, chunk, workers):
    """`_exact_noise` draws in chunks of NOISE_CHUNK keys per worker with the ranks of all keys, on worker processes
    (here every draw of two or more keys, one key a request): the same numbers as one call of aggregate_noise.noise
    per measure, also where counters collide (ranks > 0)."""
    plan = plan_aggregate(ZCDP(0.5, 1e-6), METRICS, max_contributions=5, keys="public")
    randomness = Randomness(7)
    hi = np.array([0, 0, 0, 1, 1, 2], dtype=np.int64)
    lo = np.array([5, 5, 6, 5, 5, 9], dtype=np.uint64)
    monkeypatch.setattr(group_by, "NOISE_CHUNK", chunk)
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 2)
    monkeypatch.setattr(draw_pool, "TASK", 1)
    with draw_pool.DrawPool(workers) as pool:
        drawn = group_by._exact_noise(randomness, plan, hi, lo, threading.Event(), pool)
    assert drawn is not None and set(drawn) == {i for i, m in enumerate(plan.measures) if m.tag != THRESHOLD_TAG}
    for i, values in drawn.items():
        m = plan.measures[i]
        assert np.array_equal(values, aggregate_noise.noise(randomness, m.tag, hi, lo, m.sigma))


def test_exact_noise_starts_every_worker(monkeypatch):
    """`_exact_noise` hands the pool chunks of MIN_PARALLEL draws per worker, so a large key set starts all of them
    (chunks of NOISE_CHUNK·workers started a quarter of them at 16 threads), and draws what one call would."""
    plan = plan_aggregate(ZCDP(0.5, 1e-6), {"n": "users"}, max_contributions=5, keys="public")
    randomness = Randomness(3)
    hi, lo = np.zeros(200, dtype=np.int64), np.arange(200, dtype=np.uint64)
    monkeypatch.setattr(group_by, "NOISE_CHUNK", 10)
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 25)
    monkeypatch.setattr(draw_pool, "TASK", 10)
    with draw_pool.DrawPool(4) as pool:
        drawn = group_by._exact_noise(randomness, plan, hi, lo, threading.Event(), pool)
        assert len(pool._all) == 4
    assert drawn is not None
    for i, values in drawn.items():
        m = plan.measures[i]
        assert np.array_equal(values, aggregate_noise.noise(randomness, m.tag, hi, lo, m.sigma))


class _SerialAfterSums:
    """A stand-in for group_by's one-thread pool whose task runs only when its result is asked for, i.e. after the
    sums: the order the noise was drawn in before it moved into a thread."""

    def __init__(self, max_workers: int):
        pass

    def __enter__(self) -> _SerialAfterSums:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn, *args):
        return mock.Mock(result=lambda: fn(*args))


# ---------------------------------------------------------------- listing

@pytest.mark.parametrize("keys", ["dpsips", ["A", "B"]])
def test_listing_is_sorted_and_a_function_of_released_keys_and_numbers(con, keys):
    """test_order's pair: D' adds a user holding B and 50 unique keys (rows first). Sorted on both sides, and
    A — untouched by that user — gets identical numbers: noise is keyed per key, not by what else is present."""
    d, d2 = (t.append_column("rating", pa.array([3] * t.num_rows, pa.int64())) for t in neighbours())
    same = 0
    for seed in range(5):
        a, b = (run(con, t, keys=keys, max_contributions=4, seed=seed, epsilon=1.0, rho=None, delta=1e-5)
                for t in (d, d2))
        ka, kb = (r.to_arrow().column("item").to_pylist() for r in (a, b))
        for r, k in ((a, ka), (b, kb)):
            assert k == sorted(k) and r.to_arrow().column(0).num_chunks == 1
            assert [row[0] for row in r.items.fetchall()] == k
        if ka == kb == ["A", "B"]:
            same += 1
            assert a.to_arrow().slice(0, 1).equals(b.to_arrow().slice(0, 1))
    assert same >= 3


def test_public_keys_are_exactly_the_public_set(con):
    t = ratings()
    public = ["k005", "k001", "nobody", "k001"]
    agg = run(con, t, keys=public)
    assert agg.to_arrow().column("item").to_pylist() == ["k001", "k005", "nobody"]
    assert agg.plan.selection_budget is None and agg.spent.zcdp_delta == 0
    con.register("pub", pa.table({"item": ["k002", "zz"]}))
    for given in ("pub", con.table("pub"), pa.table({"item": ["k002", "zz"]}).to_pandas()):
        assert run(con, t, keys=given).to_arrow().column("item").to_pylist() == ["k002", "zz"]


def test_threshold_mode_releases_users_without_a_second_budget(con):
    agg = run(con, ratings(n_users=2000), keys="threshold", metrics={"n": "users"})
    assert agg.plan.threshold is not None and agg.plan.measures[0].rho == 0 and len(agg) > 0
    assert all(n >= agg.plan.threshold.threshold for n in agg.to_arrow().column("n").to_pylist())
    assert math.isclose(agg.spent.rho, 0.5)


def test_threshold_mode_users_count_and_denominator_are_the_thresholds_draw(con):
    """keys="threshold", m = 1, declared column (spec §4.2): released users == count == the mean's denominator,
    all the threshold's noisy count, and the mean is o + S̃/that count — one draw, seeded."""
    seen: dict = {}

    def spy(plan, noisy):
        seen.update(noisy)
        return finish(plan, noisy)

    metrics = {"u": "users", "n": "count", "avg": ("mean", "rating", 1, 5)}
    with mock.patch("duckdp.group_by.finish", spy):
        agg = run(con, ratings(n_users=3000), keys="threshold", metrics=metrics, not_null="rating",
                  max_contributions=3)
    out, plan = agg.to_arrow(), agg.plan
    users = out.column("u").to_numpy()
    assert len(users) > 10 and users.tolist() == out.column("n").to_pylist()
    thr, s = plan.measure("u", "users"), plan.measure("avg", "sum")
    assert plan.measure("avg", "count") is thr and len(plan.measures) == 2
    assert users.tolist() == seen[(thr.metric, thr.part)].tolist()
    assert np.array_equal(out.column("avg").to_numpy(),
                          finish_mean(seen[(s.metric, s.part)], users, 1, 5, s.step, s.offset))


def test_threshold_mode_report_names_every_reader_of_the_biased_count(con):
    """The selection-bias note names each metric reading the threshold's noisy count (spec §4.2: users, and at
    m = 1 count and a declared mean's denominator), and there is no note where no metric reads it."""
    metrics = {"u": "users", "n": "count", "avg": ("mean", "rating", 1, 5)}
    agg = run(con, ratings(n_users=500), keys="threshold", metrics=metrics, not_null="rating", max_contributions=3)
    note = next(line for line in agg.report().splitlines() if "note" in line)
    assert "u.users, n.count, avg.count read the threshold's noisy count" in note
    sums = run(con, ratings(n_users=500), keys="threshold", metrics={"s": ("sum", "rating", 1, 5)},
               max_contributions=3)
    assert "threshold's noisy count" not in sums.report() and "note" not in sums.report()


def test_threshold_mode_measures_read_the_pairs_the_threshold_counted(con):
    """Δ0 = 2 binds for most users: with the noise set to 0 the released rows per key (m = 2, one row per pair:
    its own measure) equal the threshold's users on every key — one truncation. Truncating again for the
    measures (the old stage 2 with a fresh salt) keeps other pairs, and the counts differ."""
    zero = mock.patch("duckdp.aggregate_noise.noise",
                      lambda r, tag, hi, lo, sigma, ranks=None, pool=None, floors=None:
                      np.zeros(hi.size, dtype=np.int64) if floors is None else np.where(floors <= 0, 0, floors - 1))
    with zero:
        agg = run(con, ratings(n_users=3000, seed=2), keys="threshold", metrics={"u": "users", "n": "count"},
                  max_rows_per_key=2, max_contributions=2)
    out = agg.to_arrow()
    assert agg.plan.measure("n", "count").tag != THRESHOLD_TAG and len(out) > 10
    assert out.column("u").to_pylist() == out.column("n").to_pylist()


@pytest.mark.parametrize("collide", [False, True])
def test_threshold_mode_streams_its_candidates_in_batches_releasing_the_same(con, collide):
    """keys="threshold" reads its candidate keys in batches of BATCH_ROWS (the driver holds one batch, not every
    candidate's measures): batches of 7 keys release exactly what one batch does, seeded — also where keys share
    a counter (forced: 3 counters for 300 keys), whose collision ranks (SQL, by key value: the stream itself comes
    in the engine's order) equal `collision_ranks` of all the candidates sorted by key and run on across batches."""
    t = ratings(n_users=3000, n_keys=300, seed=6)
    kw = {"keys": "threshold", "rho": 2.0, "max_contributions": 8}
    shared = ("0::BIGINT", "(hash(_dp_k0) % 3)::UBIGINT", False)
    counter_idents = (lambda ctx: shared) if collide else stages_sql._counter_idents
    with mock.patch.object(stages_sql, "_counter_idents", counter_idents):
        whole = run(con, t, **kw).to_arrow()
        plan = plan_aggregate(ZCDP(2.0, 1e-6), METRICS, max_contributions=8, keys="threshold")
        with mock.patch.object(stages_sql, "BATCH_ROWS", 7):
            batched = run(con, t, **kw).to_arrow()
            with open_run(con, t, "user_id", "item", Randomness(1), truncation="global") as st:
                batches = list(stages_sql.user_counts(st, plan))
    assert whole.equals(batched) and len(whole) > 20
    assert max(b.num_rows for b in batches) == 7 and sum(b.num_rows for b in batches) > 250
    table = pa.Table.from_batches(batches).sort_by("_dp_k0")
    ranks = table.column("_dp_rank").to_numpy()
    assert ranks.tolist() == collision_ranks(*counters(table)).tolist() and (ranks.max() > 50) == collide


def threshold_measures(con, table: pa.Table, plan, seed: int = 0) -> dict:
    """keys="threshold"'s per-key [c, measures…] of `table` under `seed`'s salts."""
    with open_run(con, table, "user_id", "item", Randomness(seed), truncation="global") as st:
        t = stages_sql.user_counts(st, plan).read_all()
    cols = ["_dp_c"] + [f"_dp_m{i}" for i, m in enumerate(plan.measures) if m.tag != THRESHOLD_TAG]
    return {k: np.array([t.column(c)[i].as_py() for c in cols]) for i, k in enumerate(t.column("_dp_k0").to_pylist())}


def test_threshold_mode_one_truncation_meets_the_sensitivities_on_a_neighbour_pair(con):
    """Under a fixed salt the one truncation is a per-user function (spec §4.2): adding a user with 5 rows of
    10⁶ on 12 keys (Δ0 = 4, m = 2) moves ≤ Δ0 keys, c by ≤ 1, rows by ≤ m and the centred sum by ≤ m·h grid
    steps per key (spec §3) — on the threshold's counts and the measures alike, the clip's bound met. Its power:
    the same pair under different salts (a truncation that is not one fixed per-user function) moves more keys."""
    base = ratings(n_users=400, n_keys=20, seed=5)
    user = pa.table({"user_id": pa.array([10**6] * 60, pa.int64()), "item": [f"k{k:03d}" for k in range(12)] * 5,
                     "rating": pa.array([10**6] * 60, pa.int64())})
    metrics = {"u": "users", "n": "count", "avg": ("mean", "rating", 1, 5)}
    plan = plan_aggregate(ZCDP(0.5, 1e-6), metrics, max_contributions=4, max_rows_per_key=2, keys="threshold")
    for seed, ok in ((0, True), (1, False)):
        a, b = threshold_measures(con, base, plan), threshold_measures(con, pa.concat_tables([user, base]), plan, seed)
        measured = [x for x in plan.measures if x.tag != THRESHOLD_TAG]
        width = 1 + len(measured)
        bound = np.array([1] + [round(x.sensitivity / 2) for x in measured])    # per key: ℓ2 / √Δ0 (spec §3)
        diff = {k: np.abs(b[k] - a.get(k, np.zeros(width, dtype=np.int64))) for k in b}
        moved = [k for k, d in diff.items() if d.any()]
        assert set(a) <= set(b)
        within = len(moved) <= 4 and all(np.all(d <= bound) for d in diff.values())
        assert within == ok, (seed, {k: diff[k] for k in moved})
        if ok:                                    # the clip binds: the centred sum's bound is met
            i = 1 + measured.index(plan.measure("avg", "sum"))
            assert max(d[i] for d in diff.values()) == bound[i]


def test_public_keys_without_delta_are_told_why_it_is_needed(con):
    """Selection's message ("partition selection cannot be pure DP") would be wrong for public keys."""
    with pytest.raises(InvalidParameter, match="public keys spend none of it"):
        run(con, ratings(), keys=["k001"], delta=None)
    with pytest.raises(InvalidParameter, match="partition selection cannot be pure DP"):
        run(con, ratings(), keys="dpsips", delta=None)


@pytest.mark.parametrize(("kw", "match"), [(dict(by="itm"), "by 'itm' is not a column"),
                                           (dict(by=[]), "by must name at least one column"),
                                           (dict(by="user_id"), "user_col and by must be distinct"),
                                           (dict(user_col="uid"), "user_col 'uid' is not a column")])
def test_bad_columns_are_named_by_aggregates_own_parameters(con, kw, match):
    """aggregate names its key columns `by`: its errors say so (select's say item_col)."""
    with pytest.raises(SchemaError, match=match):
        run(con, ratings(), **kw)


@pytest.mark.parametrize("algo", ["dpsips", "adaptive_sips", "weighted_gaussian", "mad2r"])
def test_pre_threshold_refused_for_weighted_selections(con, algo):
    with pytest.raises(InvalidParameter, match="no privacy proof"):
        run(con, ratings(), keys=algo, pre_threshold=3)


# ---------------------------------------------------------------- numbers

def test_released_numbers_lie_on_the_grid(con):
    agg = run(con, ratings(), keys=[f"k{k:03d}" for k in range(40)])
    tab = agg.to_arrow()
    assert tab.schema.field("raters").type == pa.int64() and tab.schema.field("ratings").type == pa.int64()
    step = agg.plan.measure("stars", "sum").step
    x = np.asarray(tab.column("stars").to_pylist()) / step
    assert np.array_equal(x, np.round(x))


def test_true_measures_match_the_reference_where_no_bound_binds(con):
    t = ratings()
    keys = [f"k{k:03d}" for k in range(40)]
    plan = plan_aggregate(ZCDP(0.5, 1e-6), METRICS, max_contributions=50, keys="public")
    got = true_measures(con, t, plan, keys)
    ref = bounded_measures(plan, t.column("user_id").to_pylist(), t.column("item").to_pylist(),
                           t.column("rating").to_pylist(), keys)
    for i, m in enumerate(plan.measures):
        assert got[:, i].tolist() == [int(v) for v in ref[(m.metric, m.part)]], m


@pytest.mark.parametrize("m", [1, 2])
def test_null_values_are_never_counted_or_clipped(con, m):
    """A NULL value is dropped before the row sample (spec §2 stage 4): sums and a mean's count read only the
    non-NULL values (no bound binds here), while rows and users count every row; a NULL is never clipped to a
    bound (least/greatest skip NULLs, so a NULL passed to the clip would count as `upper`)."""
    users = [1, 1, 2, 2, 3, 4, 5, 6]
    keys = ["a", "b", "a", "b", "a", "a", "b", "b"]
    values = [2.0, None, None, 3.0, 4.0, None, 1.0, None]
    t = pa.table({"user_id": users, "item": keys, "rating": pa.array(values, pa.float64())})
    plan = plan_aggregate(ZCDP(0.5, 1e-6), {"u": "users", "n": "count", "s": ("sum", "rating", 0, 5),
                                            "avg": ("mean", "rating", 0, 5)},
                          max_contributions=5, max_rows_per_key=m, keys="public")
    got = true_measures(con, t, plan, ["a", "b"])
    for i, ms in enumerate(plan.measures):
        if ms.part == "sum":                 # non-NULL values: a = 2 + 4, b = 3 + 1, two each
            expect = [round(v / ms.step) - 2 * ms.offset for v in (6.0, 4.0)]
        elif ms.metric == "avg":             # a mean's count: rows with a value
            expect = [2, 2]
        else:                                # users, rows: every row (one per user and key)
            expect = [4, 4]
        assert got[:, i].tolist() == expect, (ms.metric, ms.part)


@pytest.mark.parametrize("m", [1, 2])
def test_metrics_are_one_grouped_pass_over_the_input(con, m):
    """Stages 1–5 read the input once (issue #20's speed at scale): each (user, key) carries its sampled integers
    through the Δ0 truncation, so the metrics' query neither reads the rows again nor joins them back on the kept
    pairs, and with m = 1 the row sample is a min_by per pair, not a window over the rows."""
    con.register("t", ratings(n_users=50, n_keys=5))
    seen: list[tuple[str, str, str]] = []
    render = RunContext.render

    def spy(self, template, idents, params):
        text, bound = render(self, template, idents, params)
        seen.append((template, text, self.source.sql))
        return text, bound

    with mock.patch.object(RunContext, "render", spy):
        run(con, "t", keys=["k001", "k002"], max_rows_per_key=m)
    (text, source), = [(text, source) for name, text, source in seen if name == "agg_measures"]
    assert text.count(source) == 1
    assert ("PARTITION BY _dp_user, " in text) == (m > 1)        # the truncation's window partitions by user only


def test_noise_has_the_plans_sigma(con):
    """Keys with no rows release pure noise: its spread is σ of each measure (plan, spec §4)."""
    t = ratings(n_users=5, n_keys=3)
    keys = [f"none{i:04d}" for i in range(600)]
    agg = run(con, t, keys=keys, metrics={"n": "count", "s": ("sum", "rating", 0, 1)}, rho=0.02)
    tab = agg.to_arrow()
    for name, part in (("n", "count"), ("s", "sum")):
        m = agg.plan.measure(name, part)
        x = np.asarray(tab.column(name).to_pylist(), dtype=float) / m.step
        se = m.sigma / math.sqrt(2 * len(keys))          # std error of a sample std
        assert abs(x.std() - m.sigma) < 4 * se and abs(x.mean()) < 4 * m.sigma / math.sqrt(len(keys))


def test_seeded_runs_reproduce_and_say_so(con):
    t = ratings()
    a, b, c = run(con, t, seed=3), run(con, t, seed=3), run(con, t, seed=4)
    assert a.to_arrow().equals(b.to_arrow()) and not a.to_arrow().equals(c.to_arrow())
    assert a.seeded and not run(con, t, seed=None).seeded and "SEEDED" in a.report()


@pytest.mark.parametrize("budget", [{"rho": 0.3, "delta": 1e-6}, {"epsilon": 1.0, "delta": 1e-6}])
@pytest.mark.parametrize("keys", ["adaptive_sips", "threshold", ["k001"]])
def test_spent_never_exceeds_the_request(con, budget, keys):
    agg = run(con, ratings(), keys=keys, **({"rho": None} | budget))
    if "rho" in budget:
        assert agg.spent.rho <= budget["rho"]
        assert agg.spent.zcdp_delta <= budget["delta"]
    else:
        assert agg.spent.epsilon <= budget["epsilon"] and agg.spent.delta <= budget["delta"]


def test_session_charges_once_and_refuses_an_overrun_before_reading(con):
    t = ratings()
    s = duckdp.Session(con, rho=1.0, delta=1e-5)
    s.aggregate(t, by="item", metrics=METRICS, keys="dpsips", rho=0.6, delta=1e-6, max_contributions=20)
    assert len(s.events) == 1 and math.isclose(s.spent.value, 0.6)
    with pytest.raises(BudgetExceeded):
        s.aggregate(poisoned(con, t), by="item", metrics=METRICS, keys="dpsips", rho=0.6, delta=1e-6,
                    max_contributions=20)


@pytest.mark.parametrize("metrics, error, match", [
    ({"x": ("sum", "nope", 1, 5)}, SchemaError, "'nope' is not in"),
    ({"x": ("mean", "rating", 5, 1)}, InvalidParameter, "lower must be < upper"),
    ({"x": ("sum", "item", 1, 5)}, SchemaError, "not numeric"),
    ({}, InvalidParameter, "non-empty"),
    ({"item": "count"}, InvalidParameter, "name of a key column"),
])
def test_bad_input_is_refused_before_reading(con, metrics, error, match):
    src = poisoned(con, ratings())
    with pytest.raises(error, match=match):
        run(con, src, metrics=metrics, keys="dpsips")


def test_bad_keys_and_spark_only_errors(con):
    with pytest.raises(InvalidParameter, match="neither a select"):
        run(con, ratings(), keys="no_such_table_or_algo")
    with pytest.raises(InvalidParameter, match="empty list"):
        run(con, ratings(), keys=[])


# ---------------------------------------------------------------- coverage

def test_confidence_intervals_cover_at_the_nominal_rate(con):
    """No bound binds, so the bounded statistic is the true one; each interval covers it w.p. ≥ 0.9, so over
    n keys the misses are ≤ Binomial(n, 0.1): allow mean + 4 sd."""
    t = ratings(n_users=3000, n_keys=300, seed=1)
    keys = [f"k{k:03d}" for k in range(300)]
    agg = run(con, t, keys=keys, confidence=0.9, rho=1.0, seed=7)
    con.register("t", t)
    truth = con.sql("SELECT item, count(DISTINCT user_id) AS raters, count(*) AS ratings, sum(rating) AS stars, "
                    "avg(rating) AS avg FROM t GROUP BY item ORDER BY item").to_arrow_table()
    got = agg.to_arrow()
    assert got.column("item").equals(truth.column("item"))
    n, limit = len(keys), len(keys) * 0.1 + 4 * math.sqrt(len(keys) * 0.09)
    for name in METRICS:
        x = np.asarray(truth.column(name).to_pylist(), dtype=float)
        lo, hi = (np.asarray(got.column(f"{name}_{s}").to_pylist(), dtype=float) for s in ("low", "high"))
        assert np.all(lo <= np.asarray(got.column(name).to_pylist(), dtype=float))
        assert ((x < lo) | (x > hi)).sum() <= limit, name
    assert n == 300


# ---------------------------------------------------------------- sensitivity audit (engine stages)

def true_measures(con, table, plan, keys: list[str], seed: int = 0, truncation: str = "per_user") -> np.ndarray:
    """The engine's true per-key integers (before noise) for `plan` on the public key set `keys`, as aggregate
    computes them (`key_measures`: under truncation="global" the key-rank cut)."""
    with open_run(con, table, "user_id", "item", Randomness(seed), truncation=truncation) as st:
        ks = stages_sql.keyset(st, pa.table({"_dp_k0": sorted(keys)}))
        out = stages_sql.key_measures(st, plan, ks)
    return np.column_stack([out.column(f"_dp_m{i}").to_numpy() for i in range(len(plan.measures))])


def audit_neighbours() -> tuple[pa.Table, pa.Table, list[str]]:
    """D: 60 users rating 12 keys; D' adds one user with 5 rows of ~10⁶ on each of the 12 keys (the spec's audit)."""
    base = ratings(n_users=60, n_keys=12, seed=3)
    keys = [f"k{k:03d}" for k in range(12)]
    extra = pa.table({"user_id": pa.array([10**6] * 60, pa.int64()), "item": [k for k in keys for _ in range(5)],
                      "rating": pa.array([10**6 + i for i in range(60)], pa.int64())})
    return base, pa.concat_tables([extra, base]), keys


def worst_ratio(con, plan, honest_plan, truncation: str = "per_user") -> float:
    """max over measures of ‖true(D') − true(D)‖₂ / the honest plan's ℓ2 sensitivity, over seeds."""
    d, d2, keys = audit_neighbours()
    worst = 0.0
    for seed in range(3):
        diff = (true_measures(con, d2, plan, keys, seed, truncation)
                - true_measures(con, d, plan, keys, seed, truncation))
        for i, m in enumerate(honest_plan.measures):
            worst = max(worst, float(np.sqrt((diff[:, i].astype(float) ** 2).sum())) / m.sensitivity)
    return worst


@pytest.mark.parametrize("truncation", ["per_user", "global"])
def test_engine_sensitivity_holds_and_broken_bounds_are_caught(con, truncation):
    """The added user's 12 keys at Δ0 = 4 move each measure by at most its ℓ2 sensitivity, under both truncation
    orders (global: the key-rank cut); without the row cap, the clipping or Δ0 the same neighbours exceed it."""
    plan = plan_aggregate(ZCDP(0.5, 1e-6), METRICS, max_contributions=4, max_rows_per_key=1, keys="public")
    assert 0.9 < worst_ratio(con, plan, plan, truncation) <= 1.0            # tight for this user, never above
    no_row_cap = dataclasses.replace(plan, max_rows_per_key=10**6)
    assert worst_ratio(con, no_row_cap, plan, truncation) > 4
    wide = tuple(Metric(m.name, m.kind, m.column, -1e12, 1e12) if m.column else m for m in plan.metrics)
    no_clip = dataclasses.replace(plan, metrics=wide)
    assert worst_ratio(con, no_clip, plan, truncation) > 1e3
    no_truncation = dataclasses.replace(plan, max_contributions=12)      # the user keeps all 12 keys: ℓ2 √3 ×
    assert worst_ratio(con, no_truncation, plan, truncation) > 1.5


# ---------------------------------------------------------------- command line

def test_cli_aggregate_public_keys_csv_and_ledger(con, tmp_path, capsys):
    """`duckdp aggregate`: parquet in, public keys from a CSV file, CSV out sorted by key (the same numbers as
    the API on the same seed); --ledger charges the run once and refuses the overrun with no output."""
    t = ratings()
    pq.write_table(t, tmp_path / "in.parquet")
    pcsv.write_csv(pa.table({"item": ["k003", "k001", "zz"]}), tmp_path / "keys.csv")
    base = ["aggregate", str(tmp_path / "in.parquet"), "--by", "item", "--metric", "n=count",
            "--metric", "avg=mean:rating:1:5", "--keys", str(tmp_path / "keys.csv"), "--rho", "0.4",
            "--delta", "1e-6", "--max-contributions", "50", "--seed", "5"]
    ledger = ["--ledger", str(tmp_path / "l.duckdb"), "--total-rho", "0.7", "--total-delta", "1e-5"]
    assert cli.main([*base, "-o", str(tmp_path / "out.csv"), *ledger]) == 0
    out = pcsv.read_csv(tmp_path / "out.csv")
    assert out.column_names == ["item", "n", "avg"] and out.column("item").to_pylist() == ["k001", "k003", "zz"]
    api = duckdp.aggregate(con, t, by="item", metrics={"n": "count", "avg": ("mean", "rating", 1, 5)},
                           keys=["k001", "k003", "zz"], rho=0.4, delta=1e-6, max_contributions=50, seed=5).to_arrow()
    assert out.column("n").to_pylist() == api.column("n").to_pylist()
    assert np.allclose(out.column("avg").to_pylist(), api.column("avg").to_pylist())
    assert "remaining ρ=0.3" in capsys.readouterr().out
    assert cli.main([*base, "-o", str(tmp_path / "again.parquet"), *ledger]) == 2
    assert "would exceed" in capsys.readouterr().err and not (tmp_path / "again.parquet").exists()


def test_pre_threshold_keeps_keys_under_k_users_out(con):
    """keys='threshold', pre_threshold=k: the selection runs on users − (k − 1), so a key with < k users never
    appears (spec §4.4); with a select() mechanism it is refused until implemented, never ignored."""
    t = ratings(n_users=3000, n_keys=60, seed=2)
    con.register("pt", t)
    users = dict(con.sql("SELECT item, count(DISTINCT user_id) FROM pt GROUP BY item").fetchall())
    k = sorted(users.values())[len(users) // 2]               # half the keys are below k
    agg = run(con, t, keys="threshold", metrics={"n": "users", "c": "count"}, pre_threshold=k, rho=2.0)
    released = agg.to_arrow().column("item").to_pylist()
    assert released and all(users[key] >= k for key in released)


# ---------------------------------------------------------------- pre_threshold with count selections (spec §4.4)

def few_and_many(k: int) -> pa.Table:
    """Keys s0..s9 held by exactly k − 1 users each, keys b0..b9 by 3k users each (one row per user and key)."""
    users, items, uid = [], [], 0
    for prefix, n in (("s", k - 1), ("b", 3 * k)):
        for j in range(10):
            users += range(uid, uid + n)
            items += [f"{prefix}{j}"] * n
            uid += n
    return pa.table({"user_id": pa.array(users, pa.int64()), "item": items, "rating": pa.array([3] * len(users))})


def stage_selection(con, table, algo: str, budget, d0: int, k: int | None, seed: int) -> pa.Table:
    """The selection of `algo` on `table` as aggregate runs it: pre-thresholded at k, or `mech.run` (k None)."""
    mech = duckdp.mechanisms.get(algo)
    params = Params(d0, mech.check_params({}))
    rounds = mech.plan(budget, params)
    with open_run(con, table, "user_id", "item", Randomness(seed)) as st:
        if k is None:
            return mech.run(st, rounds, params)[0]
        return pre_thresholded_selection(st, stages_sql, mech, rounds, d0, k)[0]


@pytest.mark.parametrize("algo, budget", [("count_gaussian", ZCDP(0.5, 1e-6)), ("count_laplace", EpsDelta(1.0, 1e-6))])
def test_pre_threshold_one_is_the_plain_count_selection(con, algo, budget):
    """k = 1 shifts by 0: the pre-thresholded stages are the mechanism's own run, key for key, on every seed."""
    t = ratings(n_users=2000, n_keys=60, seed=4)
    for seed in range(4):
        plain = stage_selection(con, t, algo, budget, 5, None, seed)
        assert plain.num_rows > 0
        assert stage_selection(con, t, algo, budget, 5, 1, seed).equals(plain)


def test_pre_threshold_count_selections_never_release_keys_under_k(con):
    """Keys with k − 1 users are dropped before noise: never released, whatever the seed, while the plain
    selection (pre_threshold = 1) releases them at this budget (the test's power) and keys with 3k users stay."""
    k = 20
    t = few_and_many(k)
    small = {f"s{j}" for j in range(10)}
    plain = set()
    for seed in range(12):
        agg = run(con, t, keys="count_gaussian", metrics={"n": "users"}, pre_threshold=k, rho=5.0,
                  max_contributions=1, seed=seed)
        released = set(agg.to_arrow().column("item").to_pylist())
        assert not released & small and len(released) >= 8, (seed, released)
        assert agg.plan.pre_threshold == k and "pre_threshold 20" in agg.report()
        plain |= set(run(con, t, keys="count_gaussian", metrics={"n": "users"}, rho=5.0, max_contributions=1,
                         seed=seed).to_arrow().column("item").to_pylist())
        laplace = stage_selection(con, t, "count_laplace", EpsDelta(5.0, 1e-6), 1, k, seed)
        assert not set(laplace.column("item").to_pylist()) & small
    assert plain & small


def shifted_users(con, table: pa.Table, d0: int, k: int, naive: bool = False) -> dict[str, float]:
    """Per key the selection's pre-thresholded weight (users − (k − 1), keys ≤ 0 absent); `naive` instead keeps
    the raw count of keys with ≥ k users (a filter without the shift: the broken variant)."""
    with open_run(con, table, "user_id", "item", Randomness(0)) as st:
        q = stages_sql.pre_thresholded_weights(st, d0, 1 if naive else k)
        rows = st.ctx.con.execute(q.sql, q.params).fetchall()
    return {key: w for key, w in rows if not naive or w >= k}


def test_pre_threshold_shift_is_one_lipschitz_on_a_neighbour_pair(con):
    """D' adds one user holding Δ0 keys: one at k − 1 users (it appears, with value exactly 1), one at k + 3,
    one at 2 users (stays absent) and one new key. Every key moves by ≤ 1 and ‖Δ‖₂ ≤ √Δ0 — what the count
    selections' σ and threshold assume. A filter without the shift (keep keys with ≥ k users) jumps by k."""
    k, d0 = 6, 4
    base = pa.table({"user_id": pa.array([*range(k - 1), *range(100, 100 + k + 3), 200, 201], pa.int64()),
                     "item": ["edge"] * (k - 1) + ["big"] * (k + 3) + ["tiny"] * 2,
                     "rating": pa.array([1] * (k - 1 + k + 3 + 2), pa.int64())})
    user = pa.table({"user_id": pa.array([999] * d0, pa.int64()), "item": ["edge", "big", "tiny", "new"],
                     "rating": pa.array([1] * d0, pa.int64())})
    neighbour = pa.concat_tables([user, base])
    a, b = shifted_users(con, base, d0, k), shifted_users(con, neighbour, d0, k)
    assert a == {"big": 4.0} and b == {"big": 5.0, "edge": 1.0}
    diffs = [b.get(key, 0.0) - a.get(key, 0.0) for key in set(a) | set(b)]
    assert max(map(abs, diffs)) <= 1 and math.sqrt(sum(d * d for d in diffs)) <= math.sqrt(d0)
    na, nb = shifted_users(con, base, d0, k, naive=True), shifted_users(con, neighbour, d0, k, naive=True)
    assert max(abs(nb.get(key, 0.0) - na.get(key, 0.0)) for key in set(na) | set(nb)) == k


def test_sum_far_from_zero_saturates_instead_of_failing_after_the_charge(con):
    """Bounds far from 0 make each row worth ~2⁵⁶ grid units: 600 rows exceed BIGINT. The true sum
    saturates at ±2⁶² (1-Lipschitz, sensitivity unchanged) instead of a cast error raised after the charge,
    whose presence would depend on the data."""
    n = 600
    t = pa.table({"user_id": pa.array(range(n), pa.int64()), "item": ["a"] * n,
                  "v": pa.array([1e12] * n, pa.float64())})
    session = duckdp.Session(con, rho=1.0, delta=1e-6)
    agg = session.aggregate(t, by="item", metrics={"s": ("sum", "v", 1e12, 1e12 + 1)}, keys=["a"], rho=0.5,
                            delta=1e-7, max_contributions=1, seed=3)
    (s,) = agg.to_arrow().column("s").to_pylist()
    plan_step = agg.plan.measure("s", "sum").step
    assert 0 < s <= 2**62 * plan_step * 1.01 and s < n * 1e12
    assert session.ledger.column("error").to_pylist() == [None]


def test_users_and_count_are_one_draw_when_one_row_per_key(con):
    """m = 1: a kept (user, key) keeps exactly one row, so distinct users = rows and both metrics release the
    same noisy integer (one draw, charged once); m = 2: two draws."""
    t = ratings()
    one = run(con, t, keys=["k001", "k002", "k003", "nobody"]).to_arrow()
    assert one.column("raters").to_pylist() == one.column("ratings").to_pylist()
    two = run(con, t, keys=["k001", "k002", "k003", "nobody"], max_rows_per_key=2).to_arrow()
    assert two.column("raters").to_pylist() != two.column("ratings").to_pylist()


# ---------------------------------------------------------------- max_contributions="auto" (issue 21)

@pytest.mark.parametrize("keys", ["dpsips", "threshold", ["k001", "k002"]])
def test_auto_delta0_is_paid_from_the_aggregate_budget_and_reported(con, keys):
    """The estimate takes the default share of the call's ρ (first part), the other parts split the rest as
    without it; the plan at the chosen Δ0 is the one run; spent and the charge are the request's."""
    t = ratings()                                  # users hold 1..7 keys: the p90 lies in [4, 16)
    from duckdp.privacy.auto_contributions import DEFAULT_SHARE as share
    agg = run(con, t, keys=keys, max_contributions="auto", rho=0.5)
    choice = agg.plan.auto
    assert choice is not None and agg.plan.max_contributions == choice.max_contributions
    assert 4 <= choice.max_contributions < 16
    assert agg.plan.auto_rho == choice.plan.budget.rho == pytest.approx(0.5 * share, rel=1e-12)
    assert choice.plan.sigma == pytest.approx(1 / math.sqrt(2 * 0.5 * share))
    mode, algo = ("public", None) if isinstance(keys, list) else \
        (("select", keys) if keys == "dpsips" else ("threshold", None))
    same = plan_aggregate(ZCDP(0.5, 1e-6), METRICS, max_contributions=choice.max_contributions, keys=mode,
                          algo=algo, auto_share=share)
    assert agg.plan.measures == same.measures and agg.plan.rho == 0.5
    assert math.fsum([agg.plan.auto_rho, agg.plan.selection_budget.rho if agg.plan.selection_budget else 0.0,
                      agg.plan.threshold.rho if agg.plan.threshold else 0.0]
                     + [m.rho for m in agg.plan.measures]) == 0.5
    assert agg.spent == run(con, t, keys=keys, max_contributions=7, rho=0.5).spent
    report = agg.report()
    assert f"Δ0        : {choice.max_contributions} keys per user" in report
    assert f"auto Δ0: Δ0 = {choice.max_contributions} chosen privately" in report and f"ρ={0.5 * share:.4g}" in report
    assert run(con, t, keys=keys, max_contributions="auto", rho=0.5).to_arrow().equals(agg.to_arrow())   # seeded


def test_auto_delta0_aggregate_session_charges_once_before_reading(con):
    t = ratings()
    s = duckdp.Session(con, rho=1.0, delta=1e-5)
    s.aggregate(t, by="item", metrics=METRICS, keys="dpsips", rho=0.6, delta=1e-6, max_contributions="auto")
    assert len(s.events) == 1 and math.isclose(s.spent.value, 0.6)
    with pytest.raises(BudgetExceeded):          # charged before the estimate reads anything
        s.aggregate(poisoned(con, t), by="item", metrics=METRICS, keys="dpsips", rho=0.6, delta=1e-6,
                    max_contributions="auto")
    with pytest.raises(InvalidParameter, match="auto_share applies only"):
        run(con, t, keys="dpsips", max_contributions=5, auto_share=0.05)
    with pytest.raises(InvalidParameter, match="auto_share"):
        run(con, t, keys="dpsips", max_contributions="auto", auto_share=0.5)


def test_cli_aggregate_takes_auto(con, tmp_path, capsys):
    import json
    t = ratings()
    pq.write_table(t, tmp_path / "in.parquet")
    assert cli.main(["aggregate", str(tmp_path / "in.parquet"), "--by", "item", "--metric", "n=count",
                     "--keys", "threshold", "--rho", "0.5", "--delta", "1e-6", "--max-contributions", "auto",
                     "--seed", "3", "-o", str(tmp_path / "out.parquet"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    api = duckdp.aggregate(con, t, by="item", metrics={"n": "count"}, keys="threshold", rho=0.5, delta=1e-6,
                           max_contributions="auto", seed=3)
    chosen = summary["auto_contributions"]["max_contributions"]
    assert summary["max_contributions"] == api.plan.max_contributions == chosen
    assert any(line.startswith("auto Δ0: Δ0 = ") for line in summary["plan"])
    assert pq.read_table(tmp_path / "out.parquet").equals(api.to_arrow())


# ---------------------------------------------------------------- declared not-null value columns

NULLS = pa.table({"user_id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()), "item": ["a", "a", "a", "b", "b", "b"],
                  "rating": pa.array([5, 5, None, 1, 2, None], pa.int64())})
UCM = {"raters": "users", "ratings": "count", "stars": ("sum", "rating", 1, 5), "avg": ("mean", "rating", 1, 5)}


def test_not_null_mean_divides_by_the_row_count_and_reads_a_null_as_the_midpoint(con):
    """A NULL in a declared column is no error (its existence is data): it is read as the grid midpoint, counted
    by the mean (adding 0 to its centred sum) and by the sum (adding the midpoint), as if filled with it. Nearly
    noiseless (ρ = 10¹⁰) so the released numbers show the bounded statistic. Undeclared, NULLs are dropped."""
    kw = {"metrics": UCM, "keys": ["a", "b"], "rho": 1e10, "max_contributions": 1}
    declared = run(con, NULLS, not_null=["rating"], **kw)
    plain = run(con, NULLS, **kw)
    d, p = declared.to_arrow().to_pydict(), plain.to_arrow().to_pydict()
    assert d["raters"] == d["ratings"] == p["ratings"] == [3, 3]
    assert d["avg"] == pytest.approx([13 / 3, 6 / 3], abs=1e-3) and p["avg"] == pytest.approx([5.0, 1.5], abs=1e-3)
    assert d["stars"] == pytest.approx([13.0, 6.0], abs=1e-3) and p["stars"] == pytest.approx([10.0, 3.0], abs=1e-3)
    assert len(declared.plan.measures) == 3 and len(plain.plan.measures) == 4       # one draw fewer
    assert declared.plan.measure("avg", "count") is declared.plan.measure("ratings", "count")
    report = declared.report()
    assert "declared not-null: rating" in report and "one draw read by raters.users, ratings.count, avg.count" in report


def test_not_null_without_nulls_releases_what_the_row_count_says(con):
    """With no NULL the declared mean's count equals the row count, so a seeded mean alone releases exactly what
    the undeclared call does (same split b/2, b/2, the same true integers and draws)."""
    t = ratings()
    kw = {"metrics": {"avg": ("mean", "rating", 1, 5)}, "keys": ["k001", "k002", "k003", "nobody"]}
    assert run(con, t, not_null="rating", **kw).to_arrow().equals(run(con, t, **kw).to_arrow())


def test_not_null_plan_is_fixed_before_reading_and_charged_as_requested(con):
    """The declaration is an argument, not data: the session charges the same ρ and refuses an overrun before any
    row is read; a column no sum/mean reads is refused before the charge."""
    t = ratings()
    s = duckdp.Session(con, rho=1.0, delta=1e-5)
    s.aggregate(t, by="item", metrics=UCM, keys="dpsips", rho=0.6, delta=1e-6, not_null=["rating"])
    assert len(s.events) == 1 and math.isclose(s.spent.value, 0.6)
    with pytest.raises(BudgetExceeded):
        s.aggregate(poisoned(con, t), by="item", metrics=UCM, keys="dpsips", rho=0.6, delta=1e-6,
                    not_null=["rating"])
    with pytest.raises(InvalidParameter, match="no sum or mean metric reads"):
        s.aggregate(t, by="item", metrics=UCM, keys="dpsips", rho=0.1, delta=1e-6, not_null=["user_id"])
    assert len(s.events) == 1


def test_cli_aggregate_takes_not_null(con, tmp_path, capsys):
    import json
    pq.write_table(NULLS, tmp_path / "in.parquet")
    assert cli.main(["aggregate", str(tmp_path / "in.parquet"), "--by", "item", "--metric", "n=count",
                     "--metric", "avg=mean:rating:1:5", "--keys", "threshold", "--rho", "0.5", "--delta", "1e-6",
                     "--not-null", "rating", "--seed", "3", "-o", str(tmp_path / "out.parquet"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    api = duckdp.aggregate(con, NULLS, by="item", metrics={"n": "count", "avg": ("mean", "rating", 1, 5)},
                           keys="threshold", rho=0.5, delta=1e-6, not_null="rating", seed=3)
    assert any(line.startswith("declared not-null: rating") for line in summary["plan"])
    assert "one draw read by n.count, avg.count" in "\n".join(summary["plan"])
    assert pq.read_table(tmp_path / "out.parquet").equals(api.to_arrow())


def test_row_sample_breaks_ties_only_on_values_whose_hash_can_collide(con):
    """`_hash_colliding` (the value columns whose row-sample ties the value breaks) reads the one table of types
    whose DuckDB hash is injective (counters.type_hash_injective), as the keys' truncation does: 128-bit
    types and strings can collide; ≤ 64-bit integers, DECIMAL up to 18 digits and floats cannot. Failed before
    for VARCHAR (the value check listed the 128-bit types only)."""
    types = {"h": "HUGEINT", "uh": "UHUGEINT", "d38": "DECIMAL(38,2)", "d18": "DECIMAL(18,2)", "s": "VARCHAR",
             "b": "BIGINT", "f": "DOUBLE"}
    con.execute("CREATE OR REPLACE TABLE v AS SELECT 1 AS user_id, 'k' AS item, "
                + ", ".join(f"1::{t} AS {c}" for c, t in types.items()))
    plan = plan_aggregate(ZCDP(0.5, 1e-6), {f"sum_{c}": ("sum", c, 0, 1) for c in types}, max_contributions=1,
                          keys="public")
    with open_run(con, "v", "user_id", "item", Randomness(1)) as st:
        # both read the schema `resolve` read (Source.schema): no query on the connection
        with mock.patch.object(st.ctx, "con", mock.Mock(spec=[])):
            assert stages_sql._hash_colliding(st.ctx, plan) == {"h", "uh", "d38", "s"}
            assert stages_sql.column_types(st.ctx.con, st.source)["d38"] == ("decimal", True)


def test_row_sample_ties_follow_the_value_not_the_row_order(con):
    """A pair's m-row sample ranks its rows by a keyed hash of (user, key, value); two HUGEINT values with equal
    DuckDB hashes (2⁶⁴ + 2 and 2·2⁶⁴ + 1) tie. Which one is kept must not follow the order rows arrive in (other
    users' data, threads): the same rows listed in either order release the same sum under every seed. Failed
    before the value broke the tie (m = 2: the row listed first was kept whenever the third value ranked first)."""
    m = 2
    con.execute("SET threads = 1")
    a, b, c = 2**64 + 2, 2 * 2**64 + 1, 5
    released = []
    for order in ((a, b, c), (b, a, c)):
        con.execute("CREATE OR REPLACE TABLE r (user_id BIGINT, item VARCHAR, v HUGEINT)")
        con.executemany("INSERT INTO r VALUES (1, 'k', ?)", [[x] for x in order])
        released.append([duckdp.aggregate(con, "r", by="item", user_col="user_id", keys=["k"],
                                          metrics={"s": ("sum", "v", 0, 2**66)}, rho=10.0, delta=1e-6,
                                          max_contributions=1, max_rows_per_key=m, seed=seed)
                         .to_arrow().column("s").to_pylist() for seed in range(12)])
    assert released[0] == released[1]


@pytest.mark.parametrize("value_type", ["HUGEINT", "DECIMAL(38, 0)"])
def test_single_row_sample_ties_follow_the_value_not_the_row_order(con, value_type):
    """m = 1 keeps a pair's value of least keyed hash of (user, key, value) (`min_by`); two 128-bit values with
    equal DuckDB hashes (2⁶⁴ + 2 and 2·2⁶⁴ + 1) tie, and min_by then kept the row that arrived first — an order
    set by other users' rows and the threads. The same rows listed in either order must release the same sum
    under every seed. Failed before the value broke the tie (m = 1: the released sums followed the row order)."""
    con.execute("SET threads = 1")
    a, b = 2**64 + 2, 2 * 2**64 + 1
    released = []
    for order in ((a, b), (b, a)):
        con.execute(f"CREATE OR REPLACE TABLE r (user_id BIGINT, item VARCHAR, v {value_type})")
        con.executemany("INSERT INTO r VALUES (1, 'k', ?)", [[x] for x in order])
        released.append([duckdp.aggregate(con, "r", by="item", user_col="user_id", keys=["k"],
                                          metrics={"s": ("sum", "v", 0, 2**66)}, rho=10.0, delta=1e-6,
                                          max_contributions=1, max_rows_per_key=1, seed=seed)
                         .to_arrow().column("s").to_pylist() for seed in range(4)])
    assert released[0] == released[1]


# ---------------------------------------------------------------- stages' shortcuts (stop 30: same rows, less time)

@pytest.mark.parametrize("value_type", [pa.float64(), pa.decimal128(30, 2)])
def test_row_sample_never_picks_a_null_value_beside_a_value(con, value_type):
    """m = 1: a pair whose rows hold a NULL and a value samples the value under every salt. DuckDB's min_by skips
    NULL arguments, so its pair query has no FILTER (Dialect.min_by_skips_null); a sample that could pick the NULL
    would drop the value from the sum and the mean's count of about half the pairs. DECIMAL(30, 2) is a column
    whose hash can collide, sampled by (hash, value)."""
    n = 200
    t = pa.table({"user_id": [u for u in range(n) for _ in range(2)], "item": ["a"] * (2 * n),
                  "rating": pa.array([v for u in range(n) for v in (None, u % 5 + 1)]).cast(value_type)})
    plan = plan_aggregate(ZCDP(0.5, 1e-6), {"avg": ("mean", "rating", 0, 5)}, max_contributions=5, keys="public")
    for seed in range(3):
        got = true_measures(con, t, plan, ["a"], seed)
        for i, ms in enumerate(plan.measures):       # Σ (u mod 5 + 1) = 40 · 15 = 600 over the 200 values
            expect = n if ms.part == "count" else round(600 / ms.step) - n * ms.offset
            assert got[0, i] == expect, (seed, ms.part)


def test_restrict_matches_the_key_set_by_equality_on_every_key_column(con):
    """Stage 1's semi-join matches on `=` (keys are never NULL, so as IS NOT DISTINCT FROM would): NaN matches NaN,
    −0.0 matches 0.0, and a composite key matches only where every column does."""
    t = pa.table({"user_id": [1, 2, 3, 4, 5, 6, 7], "item": [float("nan"), -0.0, 0.0, 1.5, 2.5, 1.5, -0.0],
                  "shop": ["x", "x", "y", "y", "x", "x", "y"], "rating": [1] * 7})
    plan = plan_aggregate(ZCDP(0.5, 1e-6), {"n": "count"}, max_contributions=5, keys="public")
    with open_run(con, t, "user_id", ["item", "shop"], Randomness(0)) as st:
        ks = stages_sql.keyset(st, pa.table({"_dp_k0": [float("nan"), 0.0, 1.5], "_dp_k1": ["x", "y", "x"]}))
        rows = stages_sql.restrict(st, plan, ks)
        got = sorted(u for (u,) in con.execute(f"SELECT _dp_user FROM ({rows.sql})", rows.params).fetchall())
    assert got == [1, 3, 6, 7]


@pytest.mark.parametrize("passes", [1, 3])
def test_metrics_read_their_truncation_in_place_when_the_pairs_fit(con, monkeypatch, passes):
    """Where the input's rows ask for truncation passes, the metrics' sized pairs are stored (to be counted): when
    they fit one query the per-key query reads their truncation in place (no table of kept pairs written), else the
    kept pairs are built in passes and the stored pairs dropped before the per-key query. The release is the one
    of the run without a memory limit, and nothing is left on the connection. (truncation="per_user"; "global"
    cuts by key rank in one query: `test_global_metrics_cut_by_key_rank_in_one_query`.)"""
    con.register("t", ratings(n_users=400, n_keys=30))
    (n,), = con.sql("SELECT count(*) FROM t").fetchall()
    kw = {"keys": [f"k{k:03d}" for k in range(0, 30, 2)], "max_contributions": 3, "truncation": "per_user"}
    free = run(con, "t", **kw).to_arrow()
    monkeypatch.setattr(DuckDBStages, "passes_for", lambda self, rows: 3 if rows >= n else passes)
    log: list[tuple[str, str]] = []
    temp_table, drop, arrow = RunContext.temp_table, RunContext.drop, RunContext.arrow
    monkeypatch.setattr(RunContext, "temp_table", lambda self, stage: log.append(("table", stage))
                        or temp_table(self, stage))
    monkeypatch.setattr(RunContext, "drop", lambda self, *tables: log.append(("drop", ",".join(tables)))
                        or drop(self, *tables))
    monkeypatch.setattr(RunContext, "arrow", lambda self, template, *a: log.append(("arrow", template))
                        or arrow(self, template, *a))
    assert run(con, "t", **kw).to_arrow().equals(free)
    tables = [stage for kind, stage in log if kind == "table"]
    assert "agg_sized" in tables
    assert ("kept" in tables) == (passes > 1)
    measured = log.index(("arrow", "agg_measures"))
    dropped = [i for i, (kind, names) in enumerate(log) if kind == "drop" and "agg_sized" in names]
    assert (dropped != [] and dropped[0] < measured) == (passes > 1)
    assert leftovers(con) == []


@pytest.mark.parametrize("passes", [1, 3])
def test_global_metrics_cut_by_key_rank_in_one_query(con, monkeypatch, passes):
    """truncation="global" over a key set: each user over Δ0 keeps the keys of least rank in the secret key order
    (agg_key_ranks.sql, agg_kept_ranked.sql) — one query whatever the input's size: no truncation pass, no table
    of kept pairs, only the ranks and (where the input's rows ask for passes) the pairs stored. The release is the
    one of the run without a memory limit and nothing is left on the connection."""
    con.register("t", ratings(n_users=400, n_keys=30))
    kw = {"keys": [f"k{k:03d}" for k in range(0, 30, 2)], "max_contributions": 3, "truncation": "global"}
    free = run(con, "t", **kw).to_arrow()
    monkeypatch.setattr(DuckDBStages, "passes_for", lambda self, rows: passes)
    log: list[str] = []
    temp_table, execute = RunContext.temp_table, RunContext.execute
    monkeypatch.setattr(RunContext, "temp_table", lambda self, stage: log.append(stage) or temp_table(self, stage))
    monkeypatch.setattr(RunContext, "execute", lambda self, template, *a: log.append(template)
                        or execute(self, template, *a))
    assert run(con, "t", **kw).to_arrow().equals(free)
    assert "stage_truncate_pass" not in log and "kept" not in log and "agg_ranks" in log
    assert ("agg_pairs" in log) == (passes > 1)
    assert leftovers(con) == []


@pytest.mark.parametrize("by", ["item", ["item", "shop"]])
def test_key_rank_cut_keeps_the_windows_pairs_through_ties(con, monkeypatch, by):
    """The key-rank cut keeps, per user, exactly the pairs stage_truncate_window.sql keeps under the same salt —
    here with an order of 3 values, so nearly every comparison is a tie that the key must break (string and
    composite keys: DuckDBStages.truncation_ties), and users of 1–30 keys at Δ0 = 4. Compared measure by measure
    with `bound_keys` (the window) on the same seed."""
    t = ratings(n_users=300, n_keys=30, seed=5)
    t = t.append_column("shop", pa.array([f"s{i % 2}" for i in range(t.num_rows)]))
    coarse = "(hash(xor(hash({hashed}), $trunc_salt)) % 3)"
    monkeypatch.setattr(DuckDBStages, "truncation_order", lambda self, salt: Query(
        coarse.format(hashed=self.truncation_hashed()), {"trunc_salt": salt} | self.ctx.pair_keys_params))
    plan = plan_aggregate(ZCDP(0.5, 1e-6), METRICS, max_contributions=4, max_rows_per_key=1, keys="public")
    names = [by] if isinstance(by, str) else by
    keys = t.select(names).group_by(names, use_threads=False).aggregate([]).rename_columns(
        [f"_dp_k{i}" for i in range(len(names))])
    got = []
    for cut in (True, False):
        with open_run(con, t, "user_id", by, Randomness(4), truncation="global") as st:
            ks = stages_sql.keyset(st, keys)
            got.append(stages_sql.key_measures(st, plan, ks) if cut else
                       stages_sql.measures(st, plan, stages_sql.bound_keys(st, plan, stages_sql.restrict(st, plan, ks)),
                                           ks))
    assert got[0].equals(got[1])
    users = got[0].column("_dp_m0").to_numpy()
    assert users.sum() < len({(r["user_id"], *(r[n] for n in names)) for r in t.to_pylist()})  # Δ0 binds
