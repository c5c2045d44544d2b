"""Private GROUP BY's stages on DuckDB (templates in ./sql; spec: docs/specs/private-group-by.md §2).

Every SQL fragment built here names only internal columns (`_dp_*`) and Python floats validated by the
plan (bounds, grid steps: `repr` of a finite float is a DuckDB DOUBLE literal); value columns are quoted
identifiers checked against the input's schema, keys and counters come from the run (duckdp/run.py).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...counters import counter_sql
from ...errors import InternalError
from ...privacy.aggregate import THRESHOLD_TAG, AggregatePlan
from ...run import RunContext
from ...stages import Query
from ...stages.duckdb import DuckDBStages, merge
from ...templates import quote_ident

_SATURATE = 2**62    # bound on a measure's true integer per key (saturating sum, see measures())


def _counter_idents(ctx: RunContext) -> tuple[str, str, bool]:
    """SQL of the keys' PRF counters (duckdp/counters.py), and whether they are placeholders that
    `_positions` replaces: unseeded calls on non-integer keys count each key by its position in the
    key-sorted result, injective over its keys (and each measure draws from its own sub-key), so the
    digest is needed only where a seed must reproduce the release."""
    hi, lo, may_collide = counter_sql(ctx.source.key_types)
    if may_collide and not ctx.randomness.seeded:
        return "0::BIGINT", "0::UBIGINT", True
    return hi, lo, False


def _positions(table: pa.Table, positional: bool) -> pa.Table:
    """`table` with `_dp_clo` = 0, 1, … (its rows' positions) where the counters are positional."""
    if not positional:
        return table
    i = table.schema.get_field_index("_dp_clo")
    return table.set_column(i, "_dp_clo", pa.array(np.arange(table.num_rows, dtype=np.uint64)))


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
    hi, lo, positional = _counter_idents(ctx)
    match = f"r._dp_user = kept._dp_user AND {ctx.key_match('r', 'kept')}"
    idents = {"rows": rows.sql, "kept": kept.sql, "keyset": f"({keys.sql})", "keys": k, "match": match,
              "ranks": ", ".join(ranks), "measures": ", ".join(aggs) or "NULL AS _dp_none",
              "coalesced": ", ".join(outs) or "NULL AS _dp_none", "counter_hi": hi, "counter_lo": lo}
    params = merge(rows.params, kept.params, keys.params,
                   {"max_rows": plan.max_rows_per_key, "row_salt": ctx.randomness.salt()})
    return _positions(ctx.arrow("agg_measures", idents, params), positional)


def user_counts(engine: DuckDBStages, max_contributions: int, pre_threshold: int) -> pa.Table:
    """Stage 7's input: c = distinct users − (k − 1) per key of the Δ0-truncated input, c ≥ 1, with counters,
    sorted by key [agg_user_counts.sql]."""
    ctx = engine.ctx
    kept = engine.truncate(engine.sized(engine.pairs()), max_contributions)
    hi, lo, positional = _counter_idents(ctx)
    counts = ctx.arrow("agg_user_counts", {"kept": kept.sql, "keys": ctx.key_aliases, "counter_hi": hi,
                                           "counter_lo": lo}, merge(kept.params, {"shift": pre_threshold - 1}))
    return _positions(counts, positional)
