"""Private GROUP BY's engine stages (docs/specs/private-group-by.md §2): restrict rows to a key set, bound
each user to Δ0 keys (the shared truncation), sample ≤ m rows per (user, key), clip and discretise values,
per-key measures. One module per engine (`duckdb.py`, `spark.py`, the same functions), both running the
templates in ./sql; the few expressions those templates leave open are written here once for every engine
(`measure_idents`, with a `Dialect` per engine). The noise and the plan are engine-free
(duckdp/privacy/aggregate.py, duckdp/group_by.py).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import pyarrow as pa

from ...draw_pool import DrawPool
from ...errors import InternalError, InvalidParameter
from ...privacy.aggregate import PRE_THRESHOLD_SELECTIONS, THRESHOLD_TAG, AggregatePlan, grid_bounds
from ...stages.base import Engine
from ..base import Mechanism, Round, RoundPlan
from ..basic import CountGaussian, CountLaplace

ENGINES = ("duckdb", "spark")
ENGINE_NOTE = "aggregate runs on DuckDB and Spark"
SATURATE = 2**62    # bound on a measure's true integer per key (saturating sum, see measure_idents)


class ThresholdRule(Protocol):
    """keys="threshold": the rule an engine's `thresholded` runs on each batch of its candidates (`user_counts`'
    columns): the batch's keys that pass, with their noisy user count in a column NOISY_USERS (int64) appended,
    drawn on `pool`'s worker processes where given (duckdp/aggregate_noise.py `Threshold`)."""

    def __call__(self, batch: pa.RecordBatch, pool: DrawPool | None = None) -> pa.RecordBatch: ...


def own_stages(engine: str) -> ModuleType:
    """The aggregate stages of `engine` (a duckdp.engines name): the module of that name in this folder."""
    if engine not in ENGINES:
        raise InvalidParameter(ENGINE_NOTE)
    return importlib.import_module(f"{__name__}.{engine}")


def pre_thresholded_selection(engine: Engine, own: ModuleType, mech: Mechanism, plan: list[RoundPlan],
                              max_contributions: int, pre_threshold: int) -> tuple[pa.Table, list[Round]]:
    """`mech.run` of count_gaussian / count_laplace on users − (pre_threshold − 1) per key (spec §4.4), on any
    engine (`own`: its aggregate stages, which shift the weights: `pre_thresholded_weights`).

    The same stages as their run (pairs → truncate → weights with exponent 0 → release → output), with the
    weights shifted and keys at ≤ 0 dropped before noise. Private with the round's own σ (or λ) and threshold:
    c ↦ max(c − (k − 1), 0) is 1-Lipschitz per key, so a neighbour still moves ≤ Δ0 keys by ≤ 1 (ℓ2 ≤ √Δ0,
    ℓ1 ≤ Δ0), and a key whose shifted count is 0 is dropped exactly like an absent key, so a key a user makes
    appear has value exactly 1 — the novel-key bound of Gopi et al. journal Thm A.1 (Laplace) / A.2 (Gaussian),
    DP-SIPS Thm 13 under zCDP (Google DP's pre-thresholding). Weighted selections have no such argument: the
    user who brings a key to k users reveals every holder's weight (plan_aggregate refuses them).
    With pre_threshold = 1 it is `mech.run` exactly (same stages, salts and noise).
    """
    if not isinstance(mech, (CountGaussian, CountLaplace)) or mech.name not in PRE_THRESHOLD_SELECTIONS:
        raise InternalError(f"invariant failed: pre-thresholding runs only {PRE_THRESHOLD_SELECTIONS}, got {mech.name}")
    (round_plan,) = plan
    shifted = own.pre_thresholded_weights(engine, max_contributions, pre_threshold)
    table = engine.output(engine.release(shifted, round_plan))
    return table, [Round.from_plan(0, round_plan, engine.num_rows(table))]


def not_a_key_set(keys: Any, exc: BaseException) -> InvalidParameter:
    """The error for a `keys=` argument that is no algorithm, not 'threshold' and not readable as keys."""
    return InvalidParameter(f"keys={keys!r:.80} is neither a select() algorithm, 'threshold', nor a readable public "
                            f"key set ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")


@dataclass(frozen=True)
class Dialect:
    """What one engine's SQL spells differently in the measures (everything else is the shared template)."""

    exact: str                           # exact integer type of per-key sums (HUGEINT / DECIMAL(38, 0))
    round_even: str                      # round half to even: `<round_even>(x, 0)`
    keyed_hash: Callable[[str], str]     # a keyed 64-bit hash of a column list under `_dp_row_salt`, as BIGINT
    struct: str                          # a struct of its arguments, ordered field by field: `<struct>(a, b)`
    min_by_skips_null: bool              # min_by ignores rows whose argument is NULL (no FILTER needed)


# DuckDB's hash is a UBIGINT; shifted by −2⁶³ into BIGINT it keeps its order exactly (a monotone bijection, so the
# same rows are sampled) and min_by over a BIGINT runs on DuckDB's specialised path (~1.3× the UBIGINT one).
# DuckDB's min_by (arg_min) skips rows whose argument is NULL (since 1.1; duckdp needs ≥ 2.0): the FILTER that says
# so costs ~0.1 CPU s at 10M rows (benchmarks/RESULTS.md "aggregate vs select time (stop 30)"); Spark's min_by
# returns a NULL argument, so Spark keeps the FILTER.
DUCKDB = Dialect("HUGEINT", "round_even",
                 lambda cols: f"CAST(CAST(hash(xor(hash({cols}), _dp_row_salt)) AS HUGEINT) - {2**63} AS BIGINT)",
                 "row", min_by_skips_null=True)
SPARK = Dialect("DECIMAL(38, 0)", "bround", lambda cols: f"xxhash64(_dp_row_salt, {cols})", "struct",
                min_by_skips_null=False)


def _lit(x: float) -> str:
    return f"CAST({float(x)!r} AS DOUBLE)"


def _grid(x: str, lower: float, upper: float, step: float, offset: int, dialect: Dialect) -> str:
    """A value's grid integer: round_half_even(clip(x, lower, upper) / step) − offset, exact (spec §2 stage 4).
    For non-NULL x only: least/greatest skip NULLs on both engines (NULL would clip to a bound), so every
    aggregate of it filters NULLs out."""
    v = f"greatest(least(CAST({x} AS DOUBLE), {_lit(upper)}), {_lit(lower)})"
    exact = dialect.exact
    return f"CAST({dialect.round_even}({v} / {_lit(step)}, 0) AS {exact}) - CAST({int(offset)} AS {exact})"


def value_columns(plan: AggregatePlan) -> list[str]:
    """The distinct input columns the plan's sum/mean metrics read, in metric order (`_dp_v<j>`)."""
    out: list[str] = []
    for mt in plan.metrics:
        if mt.column is not None and mt.column not in out:
            out.append(mt.column)
    return out


def measure_idents(plan: AggregatePlan, keys: str, dialect: Dialect,
                   colliding: Collection[str] = ()) -> dict[str, str]:
    """The holes agg_pairs.sql and agg_measures.sql leave open for `plan` (stages 3–5, spec §2–3).

    Per (user, key) [agg_pairs.sql]: `ranks`, per value column j, the row sample's keyed order (NULL values
    last, never counted), and `pair_measures`, what the pair carries through the Δ0 truncation. With m = 1:
    `_dp_x<j>`, the value of least keyed hash `_dp_h<j>` among the pair's non-NULL values (`min_by`; no window). Two
    distinct values tie only where the engine's hash can collide on them (`colliding`: the value columns of 128-bit
    types on DuckDB, hash(2⁶⁴ + 2) = hash(2⁶⁵ + 1)); there min_by orders by (hash, value), as a tie left to it
    would follow the order rows arrive in (other users' rows, the threads), elsewhere by the hash alone (its
    faster path).
    With m > 1: `_dp_n` rows, `_dp_n<j>` kept rows with a value (a mean's count) and, per sum measure i,
    `_dp_s<i>` = Σ over the kept rows (row number `_dp_r<j>` ≤ m) of the value's grid integer (squared for a
    spread's sum of squares, part "squares"). Per key
    [agg_measures.sql]: `measures` sums those over the key's kept pairs (distinct users = kept pairs; rows =
    Σ min(_dp_n, m)), the grid integer being round_half_even(clip(v)/step) − offset, and `coalesced` gives each
    `_dp_m<i>` (i its index in plan.measures) as a saturated BIGINT, 0 for keys without pairs. Every fragment
    names only internal columns (`_dp_*`) and Python numbers the plan validated (bounds and grid steps: `repr`
    of a finite float is a DOUBLE literal on both engines; integers)."""
    m = int(plan.max_rows_per_key)
    cols = value_columns(plan)
    ranks, pair = [], []
    for j in range(len(cols)):
        order = dialect.keyed_hash(f"_dp_user, {keys}, _dp_v{j}")
        if m == 1:
            ranks.append(f"{order} AS _dp_h{j}")
            by = f"{dialect.struct}(_dp_h{j}, _dp_v{j})" if cols[j] in colliding else f"_dp_h{j}"
            skip = "" if dialect.min_by_skips_null else f" FILTER (WHERE _dp_v{j} IS NOT NULL)"
            pair.append(f"min_by(_dp_v{j}, {by}){skip} AS _dp_x{j}")
        else:
            # ties of the keyed hash go by the value, never by the order rows arrive in (equal values: any)
            ranks.append(f"row_number() OVER (PARTITION BY _dp_user, {keys} ORDER BY _dp_v{j} IS NULL, {order}, "
                         f"_dp_v{j}) AS _dp_r{j}")
    if m > 1 or not pair:
        pair.insert(0, "count(*) AS _dp_n")
    exact = dialect.exact
    aggs, outs = [], []
    for i, ms in enumerate(plan.measures):
        if ms.tag == THRESHOLD_TAG:    # the threshold's own noisy users count (no engine measure)
            continue
        mt = next(x for x in plan.metrics if x.name == ms.metric)
        declared = mt.column is not None and mt.column in plan.not_null     # spec §3.1: a public declaration
        if mt.column is None or (ms.part == "count" and declared):  # users, rows, a declared column's mean count
            expr = "count(*)" if ms.part == "users" or m == 1 else f"sum(least(_dp_n, {m}))"
        else:
            j = cols.index(mt.column)
            if ms.part == "count":       # a mean's count: kept rows with a value (NULLs are ranked last)
                counted = f"least(count(_dp_v{j}), {m}) AS _dp_n{j}"
                if m > 1 and counted not in pair:
                    pair.append(counted)
                expr = f"count(_dp_x{j})" if m == 1 else f"sum(_dp_n{j})"
            elif mt.lower is None or mt.upper is None:
                raise InternalError("invariant failed: a sum or mean has bounds")
            else:                       # Σ (round_half_even(clip(v)/step) − offset): exact integers
                x = f"_dp_x{j}" if m == 1 else f"_dp_v{j}"
                if declared:            # every kept row counts, a NULL read as the grid midpoint ⌊(lo + hi)/2⌋·step
                    mid = sum(grid_bounds(mt.lower, mt.upper, ms.step)) // 2   # (exact; a mean's offset, so it adds
                    x = f"coalesce(CAST({x} AS DOUBLE), {_lit(mid * ms.step)})"   # 0 to its centred sum)
                grid = _grid(x, mt.lower, mt.upper, ms.step, ms.offset, dialect)
                if ms.part == "squares":     # a spread's Σ (v' − o)²: ≤ 2³² per row, exact in the engine's type
                    grid = f"({grid}) * ({grid})"
                if m == 1:
                    expr = f"sum({grid})" + ("" if declared else f" FILTER (WHERE _dp_x{j} IS NOT NULL)")
                else:
                    keep = f"_dp_r{j} <= {m}" + ("" if declared else f" AND _dp_v{j} IS NOT NULL")
                    pair.append(f"sum({grid}) FILTER (WHERE {keep}) AS _dp_s{i}")
                    expr = f"sum(_dp_s{i})"
        aggs.append(f"{expr} AS _dp_m{i}")
        # saturate at ±2⁶²: 1-Lipschitz, so no sensitivity grows, and noise added in int64 cannot overflow;
        # a sum beyond BIGINT would otherwise fail the cast after the charge, an error that depends on the data
        outs.append(f"CAST(least(greatest(CAST(coalesce(_dp_m{i}, 0) AS {exact}), CAST({-SATURATE} AS {exact})), "
                    f"CAST({SATURATE} AS {exact})) AS BIGINT) AS _dp_m{i}")
    return {"ranks": ", ".join(ranks) or "NULL AS _dp_none", "pair_measures": ", ".join(pair),
            "measures": ", ".join(aggs) or "NULL AS _dp_none", "coalesced": ", ".join(outs) or "NULL AS _dp_none"}
