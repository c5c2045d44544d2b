"""Private GROUP BY's stages on DuckDB (templates in ./sql; spec: docs/specs/private-group-by.md §2).

Every SQL fragment built here names only internal columns (`_dp_*`) and Python numbers validated by the
plan (`measure_idents`); value columns are quoted identifiers checked against the input's schema, keys and
counters come from the run (duckdp/run.py). The Spark twin (./spark.py) runs the same templates.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ...aggregate_noise import NOISY_USERS
from ...counters import collisions_possible, counter_sql, type_hash_injective
from ...draw_pool import DrawPool
from ...privacy.aggregate import AggregatePlan
from ...run import RunContext
from ...source import Source
from ...stages import Query
from ...stages.duckdb import DuckDBStages, merge
from ...templates import quote_ident
from ..basic import basic_weights
from . import DUCKDB, ThresholdRule, measure_idents, not_a_key_set, value_columns

# candidate keys per batch of keys="threshold"'s stream (`user_counts`): ~20 MB of Arrow with four measures
BATCH_ROWS = 1 << 18
_NUMERIC = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint", "uinteger", "ubigint",
            "uhugeint", "float", "double", "decimal"}


def column_types(con: duckdb.DuckDBPyConnection, source: Source) -> dict[str, tuple[str, bool]]:
    """Each input column's type name and whether it is numeric (the schema `resolve` read; no query)."""
    return {c: (t.id, t.id in _NUMERIC) for c, t in source.schema}


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


def read_keys(con: duckdb.DuckDBPyConnection, keys: Any) -> pa.Table:
    """A public key set given as a table name, a relation, a pandas DataFrame or an Arrow table, as Arrow."""
    try:
        rel = con.table(keys) if isinstance(keys, str) else (keys if isinstance(keys, duckdb.DuckDBPyRelation)
                                                             else con.from_arrow(pa.Table.from_pandas(keys))
                                                             if hasattr(keys, "to_numpy") else con.from_arrow(keys))
        return rel.to_arrow_table()
    except (duckdb.Error, TypeError, ValueError, AttributeError, pa.ArrowException) as exc:
        raise not_a_key_set(keys, exc) from None


def keyset(engine: DuckDBStages, keys: pa.Table) -> Query:
    """A frame over a key set given as Arrow columns `_dp_k<i>` (a run-unique view)."""
    return engine.arrow_frame(keys, "keyset")


def key_schema(engine: DuckDBStages) -> pa.Schema:
    """The Arrow types of the input's key columns under internal names (schema only, no rows read)."""
    ctx = engine.ctx
    return ctx.con.sql(f"SELECT {ctx.key_select} FROM {ctx.source.sql} LIMIT 0").to_arrow_table().schema


def restrict(engine: DuckDBStages, plan: AggregatePlan, keys: Query | None) -> Query:
    """Stage 1: the input's rows (user, keys, value columns) whose key is in `keys` [agg_rows.sql], or every row
    with `keys` None (keys="threshold": the truncation over all keys that the threshold counts) [agg_all_rows.sql]."""
    idents = _row_idents(engine, plan)
    if keys is None:
        return engine.query("agg_all_rows", idents)
    return engine.query("agg_rows", idents | {"keyset": f"({keys.sql})", "match": _key_match(engine)}, keys.params)


def _ranked_rows(engine: DuckDBStages, plan: AggregatePlan, ranks: Query) -> Query:
    """Stage 1 over a ranked key set (agg_key_ranks.sql): `restrict`'s rows, each with its key's rank `_dp_r`
    [agg_ranked_rows.sql]."""
    return engine.query("agg_ranked_rows", _row_idents(engine, plan) | {"ranks": f"({ranks.sql})",
                                                                       "match": _key_match(engine)}, ranks.params)


def _row_idents(engine: DuckDBStages, plan: AggregatePlan) -> dict[str, str]:
    """The holes of stage 1's templates: the input's columns under internal names."""
    base = engine.ctx.base_idents()
    values = "".join(f", {quote_ident(c)} AS _dp_v{j}" for j, c in enumerate(value_columns(plan)))
    return {"source": base["source"], "user": base["user"], "key_select": base["key_select"], "values": values}


def _key_match(engine: DuckDBStages) -> str:
    """Stage 1's join condition of a row `r` on a key `k` of the key set. Keys are never NULL (refused by the run
    and in a public key set), so `=` matches as IS NOT DISTINCT FROM would, and DuckDB's hash semi-join runs
    faster on it (0.16 → 0.09 CPU s at 10M rows, 2 threads)."""
    return " AND ".join(f"r._dp_k{i} = k._dp_k{i}" for i in range(engine.ctx.key_count))


def _pairs(engine: DuckDBStages, plan: AggregatePlan, rows: Query, row_salt: int, group: str | None = None) -> Query:
    """Each (user, key) of `rows` once, with its row sample [agg_pairs.sql: m = 1 its sampled value per value
    column, else its kept rows' counts and grid sums] under `row_salt`; the key is `group` where given (the
    key's rank `_dp_r` of agg_ranked_rows.sql), else the key columns. The sample's order hashes the key columns
    either way: the same rows sampled."""
    idents = measure_idents(plan, engine.ctx.key_aliases, DUCKDB, _hash_colliding(engine.ctx, plan))
    return engine.query("agg_pairs", {"rows": rows.sql, "keys": group or engine.ctx.key_aliases,
                                      "ranks": idents["ranks"],
                                      "pair_measures": idents["pair_measures"]},
                        merge(rows.params, {"row_salt": row_salt}))


def bound_keys(engine: DuckDBStages, plan: AggregatePlan, rows: Query) -> Query:
    """Stages 2–4: each (user, key) of `rows` once, with its row sample (`_pairs`), each user's ≤ Δ0 pairs kept by
    the shared keyed truncation. The truncation's salt is drawn before the row sample's, as when they were two
    passes, so a seeded release is unchanged.

    Where the input's rows ask for truncation passes, the truncation would store the sized pairs to count them;
    they are stored here instead, so that when they fit one query the truncation stays a frame over them that
    the per-key query reads (the run's last query: no copy of the kept pairs written and read again, ~0.07 CPU s
    at 10M rows); where it runs in passes, they are dropped as soon as the kept pairs are built. Either way the
    same pairs are kept."""
    randomness = engine.ctx.randomness
    trunc_salt = randomness.salt()
    sized = engine.sized(_pairs(engine, plan, rows, randomness.salt()))
    if engine.truncation_passes() == 1:       # every truncation of the run is one query: one composed frame
        return engine.truncate(sized, plan.max_contributions, salt=trunc_salt)
    stored = engine.store(sized, "agg_sized")
    kept = engine.truncate(stored, plan.max_contributions, salt=trunc_salt)
    if engine.stored(kept):                   # built in passes into its own table: the pairs can go now
        engine.drop(stored)
    return kept


def key_measures(engine: DuckDBStages, plan: AggregatePlan, keys: Query) -> pa.Table:
    """Stages 1–5 for the key set `keys` (selected or public): `measures` of the pairs `bound_keys` keeps of
    `restrict(keys)`. Under truncation="global" the truncation ranks keys alone, so over a key set it is a cut
    on each key's rank in the set [agg_key_ranks.sql, agg_kept_ranked.sql]: the same pairs as the window of
    stage_truncate_window.sql, from a state of Δ0 integers per user over Δ0 rather than Δ0 whole pairs, so it
    is one query whatever the input's size — no user-hash passes, no copies of the pairs, and the users over Δ0
    found by a count per user rather than every pair joined to its user's count (100M rows, 2 GB, 16 threads:
    the truncation was ~45 % of the metrics' time, as it is of a selection, whose key set is every key). Each row
    takes its key's rank as it is restricted [agg_ranked_rows.sql], and from there a pair is (user, rank): the
    pairs' grouping, the cut and the per-key sums hash two integers whatever the keys (30M BIGINT-keyed rows,
    2 threads: the metrics' query 7.5 → 4.9 CPU s). The salts are drawn as `bound_keys` draws them: the same
    seeded release."""
    if engine.truncation != "global":
        return measures(engine, plan, bound_keys(engine, plan, restrict(engine, plan, keys)), keys)
    ctx = engine.ctx
    trunc_salt = ctx.randomness.salt()
    order = engine.truncation_order(trunc_salt)
    ranks = engine.store(engine.query("agg_key_ranks", {"keyset": f"({keys.sql})", "keys": ctx.key_aliases,
                                                       "order": order.sql, "ties": engine.truncation_ties()},
                                      merge(keys.params, order.params)), "agg_ranks")
    # restricted by the ranks' table (the same keys): a DuckDB table, whose min/max DuckDB pushes into the scan
    pairs = _pairs(engine, plan, _ranked_rows(engine, plan, ranks), ctx.randomness.salt(), group="_dp_r")
    bound = {"max_contributions": plan.max_contributions}
    if engine.truncation_passes() > 1:        # read thrice and larger than memory: stored (it spills)
        kept = engine.query("agg_kept_ranked", {"pairs": engine.table_name(engine.store(pairs, "agg_pairs"))}, bound)
    else:                                     # one composed query (DuckDB materialises the CTE read thrice)
        body = engine.query("agg_kept_ranked", {"pairs": "pairs"}, bound)
        kept = engine.query("stage_with", {"name": "pairs", "query": pairs.sql, "body": body.sql},
                            merge(pairs.params, body.params))
    ranked_keys = engine.query("agg_keys_ranked", {"keyset": f"({keys.sql})", "ranks": engine.table_name(ranks),
                                                   "keys": ctx.key_aliases}, keys.params)
    return _measures(engine, plan, kept, ranked_keys, "_dp_r")


def _hash_colliding(ctx: RunContext, plan: AggregatePlan) -> set[str]:
    """The plan's value columns whose DuckDB hash can collide on distinct values (counters.type_hash_injective:
    128-bit types, HUGEINT, UHUGEINT, DECIMAL wider than 18 digits; hash(2⁶⁴ + 2) = hash(2⁶⁵ + 1)): only these
    need the row sample's tie broken by the value (`measure_idents`). The schema `resolve` read; no query."""
    wanted = set(value_columns(plan))
    return {c for c, t in ctx.source.schema if c in wanted and not type_hash_injective(str(t))}


def measures(engine: DuckDBStages, plan: AggregatePlan, kept: Query, keys: Query) -> pa.Table:
    """Stage 5: per key of `keys` (sorted), its counter (`_dp_chi`, `_dp_clo`) and one exact integer per
    budgeted measure (`_dp_m<i>`, i its index in plan.measures; threshold-noised users metrics excluded),
    summed over the kept pairs of `bound_keys` [agg_measures.sql]."""
    return _measures(engine, plan, kept, keys, engine.ctx.key_aliases)


def _measures(engine: DuckDBStages, plan: AggregatePlan, kept: Query, keys: Query, group: str) -> pa.Table:
    """`measures` with the kept pairs grouped by `group`: the key columns, or the key's rank `_dp_r` that
    `kept` and each row of `keys` carry (`key_measures`)."""
    ctx = engine.ctx
    hi, lo, positional = _counter_idents(ctx)
    idents = measure_idents(plan, ctx.key_aliases, DUCKDB)
    out = ctx.arrow("agg_measures", {"kept": kept.sql, "keyset": f"({keys.sql})", "keys": ctx.key_aliases,
                                     "group": group,
                                     "measures": idents["measures"], "coalesced": idents["coalesced"],
                                     "counter_hi": hi, "counter_lo": lo}, merge(kept.params, keys.params))
    return _positions(out, positional)


def counters(engine: DuckDBStages, keys: Query) -> pa.Table:
    """The keys' PRF counters (`_dp_chi`, `_dp_clo`) in `measures`' row order [agg_counters.sql], before the
    metrics are summed (the exact noise is drawn from them meanwhile)."""
    ctx = engine.ctx
    hi, lo, positional = _counter_idents(ctx)
    out = ctx.arrow("agg_counters", {"keyset": f"({keys.sql})", "keys": ctx.key_aliases, "counter_hi": hi,
                                     "counter_lo": lo}, keys.params)
    return _positions(out, positional)


def user_counts(engine: DuckDBStages, plan: AggregatePlan) -> pa.RecordBatchReader:
    """keys="threshold" (spec §4.2): every row bound once (stages 2–4 over all keys: `bound_keys` of every row,
    one Δ0 truncation), then per key with c = distinct users − (pre_threshold − 1) ≥ 1: its counter, `_dp_c` (stage
    7's input), the plan's budgeted measures `_dp_m<i>` of the same kept pairs [agg_user_counts.sql] and the
    counter's collision rank `_dp_rank` among these keys — streamed in the engine's order (no sort of every
    candidate), `BATCH_ROWS` keys at a time, so the driver holds one batch of candidates (not all of them) while the
    caller keeps the keys that pass the threshold: their measures are stage 5's. Ranks are computed in SQL only for
    digest counters, the ones two keys can share (the candidates are stored once to rank them, by key value
    [sql/noise_scan_ranked.sql]); positional counters (unseeded calls only) run on across batches: injective over
    the candidates, and each key's noise PRF_K(position) for a fresh secret K, so which key gets which position
    changes nothing of the noise's law."""
    ctx = engine.ctx
    kept = bound_keys(engine, plan, restrict(engine, plan, None))
    hi, lo, positional = _counter_idents(ctx)
    ranked = collisions_possible(ctx.source.key_types) and not positional
    idents = measure_idents(plan, ctx.key_aliases, DUCKDB)
    counts = engine.query("agg_user_counts", {"kept": kept.sql, "keys": ctx.key_aliases, "counter_hi": hi,
                                              "counter_lo": lo, "measures": idents["measures"],
                                              "coalesced": idents["coalesced"]},
                          merge(kept.params, {"shift": plan.pre_threshold - 1}))
    if ranked:
        table = engine.table_name(engine.store(counts, "candidates"))
        return _candidates(ctx.reader("noise_scan_ranked", {"table": table, "keys": ctx.key_aliases, "columns": "t.*",
                                                            "order": ""}, {}, BATCH_ROWS),
                           ranked, positional)
    return _candidates(ctx.con.sql(counts.sql, params=counts.params).to_arrow_reader(BATCH_ROWS), ranked, positional)


def thresholded(engine: DuckDBStages, plan: AggregatePlan, rule: ThresholdRule, pool: DrawPool) -> pa.Table:
    """keys="threshold" (spec §4.2): the candidates of `user_counts` that `rule` keeps, with its `NOISY_USERS`
    column, sorted by key: the stream is read one batch at a time, the rule run on each (its draws on `pool`), only
    the kept keys held, and those sorted by DuckDB's ORDER BY of the key columns (./spark.py runs the same rule on
    Spark's executors and sorts its kept keys too)."""
    reader = user_counts(engine, plan)
    schema = reader.schema.append(pa.field(NOISY_USERS, pa.int64(), nullable=False))
    kept = pa.Table.from_batches([rule(batch, pool) for batch in reader], schema=schema)
    return engine.ctx.arrow("agg_sorted", {"table": engine.ctx.register("kept", kept), "keys": engine.ctx.key_aliases},
                            {})


def draw_workers(engine: DuckDBStages) -> int:
    """Worker processes for the call's exact draws (duckdp/draw_pool.py): the connection's `threads` setting, the
    parallelism its user gave DuckDB (the select noise stage's thread pool follows it too)."""
    return engine.ctx.threads


def _candidates(reader: pa.RecordBatchReader, ranked: bool, positional: bool) -> pa.RecordBatchReader:
    """`user_counts`' stream: rank 0 where the SQL did not rank (no two keys share a counter), positional
    counters numbered across the whole stream."""
    schema = reader.schema if ranked else reader.schema.append(pa.field("_dp_rank", pa.int64()))

    def batches() -> Iterator[pa.RecordBatch]:
        offset = 0
        with reader:
            for batch in reader:
                if not ranked:
                    batch = batch.append_column("_dp_rank", pa.array(np.zeros(batch.num_rows, dtype=np.int64)))
                if positional:
                    i = batch.schema.get_field_index("_dp_clo")
                    batch = batch.set_column(i, schema.field(i), pa.array(
                        np.arange(offset, offset + batch.num_rows, dtype=np.uint64)).cast(schema.field(i).type))
                offset += batch.num_rows
                yield batch
    return pa.RecordBatchReader.from_batches(schema, batches())


def pre_thresholded_weights(engine: DuckDBStages, max_contributions: int, pre_threshold: int) -> Query:
    """The count selections' weights (distinct users per key of the Δ0-truncated pairs: basic_weights with
    exponent 0) minus (pre_threshold − 1), keys at ≤ 0 dropped [agg_pre_threshold.sql; spec §4.4]."""
    weights = basic_weights(engine, max_contributions, 0.0)
    return engine.query("agg_pre_threshold", {"weights": weights.sql, "keys": engine.ctx.key_aliases},
                        merge(weights.params, {"shift": pre_threshold - 1}))
