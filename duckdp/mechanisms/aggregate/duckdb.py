"""Private GROUP BY's stages on DuckDB (templates in ./sql; spec: docs/specs/private-group-by.md §2).

Every SQL fragment built here names only internal columns (`_dp_*`) and Python floats validated by the
plan (bounds, grid steps: `repr` of a finite float is a DuckDB DOUBLE literal); value columns are quoted
identifiers checked against the input's schema, keys and counters come from the run (duckdp/run.py).
"""
from __future__ import annotations

import pyarrow as pa

from ...counters import counter_sql
from ...errors import InternalError
from ...privacy.aggregate import PRE_THRESHOLD_SELECTIONS, THRESHOLD_TAG, AggregatePlan
from ...stages import Query
from ...stages.duckdb import DuckDBStages, merge
from ...templates import quote_ident
from ..base import Mechanism, Round, RoundPlan
from ..basic import CountGaussian, CountLaplace, basic_weights

_SATURATE = 2**62    # bound on a measure's true integer per key (saturating sum, see measures())


def _lit(x: float) -> str:
    return f"CAST({float(x)!r} AS DOUBLE)"


def value_columns(plan: AggregatePlan) -> list[str]:
    """The distinct input columns the plan's sum/mean metrics read, in metric order (`_dp_v<j>`)."""
    out: list[str] = []
    for mt in plan.metrics:
        if mt.column is not None and mt.column not in out:
            out.append(mt.column)
    return out


def keyset(engine: DuckDBStages, keys: pa.Table) -> Query:
    """A frame over a key set given as Arrow columns `_dp_k<i>` (a run-unique view)."""
    return engine.arrow_frame(keys, "keyset")


def key_schema(engine: DuckDBStages) -> pa.Schema:
    """The Arrow types of the input's key columns under internal names (schema only, no rows read)."""
    ctx = engine.ctx
    return ctx.con.sql(f"SELECT {ctx.key_select} FROM {ctx.source.sql} LIMIT 0").to_arrow_table().schema


def restrict(engine: DuckDBStages, plan: AggregatePlan, keys: Query) -> Query:
    """Stage 1: the input's rows (user, keys, value columns) whose key is in `keys` [agg_rows.sql]."""
    ctx = engine.ctx
    base = ctx.base_idents()
    values = "".join(f", {quote_ident(c)} AS _dp_v{j}" for j, c in enumerate(value_columns(plan)))
    return engine.query("agg_rows", {"source": base["source"], "user": base["user"], "key_select": base["key_select"],
                                     "values": values, "keyset": f"({keys.sql})", "match": ctx.key_match("r", "k")},
                        keys.params)


def bound_keys(engine: DuckDBStages, rows: Query, max_contributions: int) -> Query:
    """Stage 2: each user's ≤ Δ0 pairs of `rows`, by the shared keyed truncation (fresh salt)."""
    pairs = engine.query("agg_pairs", {"rows": rows.sql, "keys": engine.ctx.key_aliases}, rows.params)
    return engine.truncate(engine.sized(pairs), max_contributions)


def measures(engine: DuckDBStages, plan: AggregatePlan, rows: Query, kept: Query, keys: Query) -> pa.Table:
    """Stages 3–5: per key of `keys` (sorted), its counter (`_dp_chi`, `_dp_clo`) and one exact integer per
    budgeted measure (`_dp_m<i>`, i its index in plan.measures; threshold-noised users metrics excluded)
    [agg_measures.sql]."""
    ctx = engine.ctx
    k = ctx.key_aliases
    cols = value_columns(plan)
    ranks = [f"row_number() OVER (PARTITION BY _dp_user, {k} ORDER BY hash(xor(hash(_dp_user, {k}), _dp_row_salt)))"
             " AS _dp_r"]
    for j in range(len(cols)):
        ranks.append(f"row_number() OVER (PARTITION BY _dp_user, {k} ORDER BY _dp_v{j} IS NULL, "
                     f"hash(xor(hash(_dp_user, {k}, _dp_v{j}), _dp_row_salt))) AS _dp_r{j}")
    aggs, outs = [], []
    for i, m in enumerate(plan.measures):
        if m.tag == THRESHOLD_TAG:    # the threshold's own noisy users count (no engine measure)
            continue
        mt = next(x for x in plan.metrics if x.name == m.metric)
        if mt.column is None:
            expr = ("count(DISTINCT _dp_user)" if m.part == "users"
                    else "count(*) FILTER (WHERE _dp_r <= _dp_max_rows)")
        else:
            j = cols.index(mt.column)
            keep = f"_dp_r{j} <= _dp_max_rows AND _dp_v{j} IS NOT NULL"
            if m.part == "count":       # a mean's count: rows with a value
                expr = f"count(*) FILTER (WHERE {keep})"
            elif mt.lower is None or mt.upper is None:
                raise InternalError("invariant failed: a sum or mean has bounds")
            else:                       # Σ (round_half_even(clip(v)/step) − offset): exact integers
                v = f"greatest(least(_dp_v{j}::DOUBLE, {_lit(mt.upper)}), {_lit(mt.lower)})"
                expr = (f"sum(round_even({v} / {_lit(m.step)}, 0)::HUGEINT - {int(m.offset)}::HUGEINT) "
                        f"FILTER (WHERE {keep})")
        aggs.append(f"{expr} AS _dp_m{i}")
        # saturate at ±2⁶²: 1-Lipschitz, so no sensitivity grows, and noise added in int64 cannot overflow;
        # a sum beyond BIGINT would otherwise fail the cast after the charge, an error that depends on the data
        outs.append(f"least(greatest(coalesce(_dp_m{i}, 0)::HUGEINT, {-_SATURATE}::HUGEINT), "
                    f"{_SATURATE}::HUGEINT)::BIGINT AS _dp_m{i}")
    hi, lo, _ = counter_sql(ctx.source.key_types)
    match = f"r._dp_user = kept._dp_user AND {ctx.key_match('r', 'kept')}"
    idents = {"rows": rows.sql, "kept": kept.sql, "keyset": f"({keys.sql})", "keys": k, "match": match,
              "ranks": ", ".join(ranks), "measures": ", ".join(aggs) or "NULL AS _dp_none",
              "coalesced": ", ".join(outs) or "NULL AS _dp_none", "counter_hi": hi, "counter_lo": lo}
    params = merge(rows.params, kept.params, keys.params,
                   {"max_rows": plan.max_rows_per_key, "row_salt": ctx.randomness.salt()})
    return ctx.arrow("agg_measures", idents, params)


def user_counts(engine: DuckDBStages, max_contributions: int, pre_threshold: int) -> pa.Table:
    """Stage 7's input: c = distinct users − (k − 1) per key of the Δ0-truncated input, c ≥ 1, with counters,
    sorted by key [agg_user_counts.sql]."""
    ctx = engine.ctx
    kept = engine.truncate(engine.sized(engine.pairs()), max_contributions)
    hi, lo, _ = counter_sql(ctx.source.key_types)
    return ctx.arrow("agg_user_counts", {"kept": kept.sql, "keys": ctx.key_aliases, "counter_hi": hi,
                                         "counter_lo": lo}, merge(kept.params, {"shift": pre_threshold - 1}))


def pre_thresholded_weights(engine: DuckDBStages, max_contributions: int, pre_threshold: int) -> Query:
    """The count selections' weights (distinct users per key of the Δ0-truncated pairs: basic_weights with
    exponent 0) minus (pre_threshold − 1), keys at ≤ 0 dropped [agg_pre_threshold.sql; spec §4.4]."""
    weights = basic_weights(engine, max_contributions, 0.0)
    return engine.query("agg_pre_threshold", {"weights": weights.sql},
                        merge(weights.params, {"shift": pre_threshold - 1}))


def pre_thresholded_selection(engine: DuckDBStages, mech: Mechanism, plan: list[RoundPlan], max_contributions: int,
                              pre_threshold: int) -> tuple[pa.Table, list[Round]]:
    """`mech.run` of count_gaussian / count_laplace on users − (pre_threshold − 1) per key (spec §4.4).

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
    shifted = pre_thresholded_weights(engine, max_contributions, pre_threshold)
    table = engine.output(engine.release(shifted, round_plan))
    return table, [Round.from_plan(0, round_plan, engine.num_rows(table))]
