"""Private GROUP BY's stages on Spark: the DuckDB templates themselves (./sql/agg_*.sql by `spark.sql`,
`SparkStages.template`), so each formula exists once; the spec is docs/specs/private-group-by.md §2.

What differs from ./duckdb.py is only what the templates leave open: identifiers quoted with backticks,
the measures' `Dialect` (DECIMAL(38, 0) for HUGEINT, `bround` for `round_even`, a salted `xxhash64` for
DuckDB's salted `hash` in the row sample), the key counters (duckdp/spark/noise.py: the same 128-bit
counters as duckdp/counters.py, so the noise drawn from them is the same), and the Δ0 truncation, the
engine's generic stage (a uniform keyed subset per user, like DuckDB's but under another hash). With no
bound binding the two engines' true integers are equal (tests/test_aggregate_spark.py).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...aggregate_noise import NOISY_USERS
from ...draw_pool import DrawPool
from ...privacy.aggregate import AggregatePlan
from ...spark.noise import counter_sql, partitioned_ranked
from ...spark.source import SparkSource, spark_ref
from ...spark.stages import SparkStages
from ..basic import basic_weights
from . import SPARK, ThresholdRule, measure_idents, not_a_key_set, value_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def column_types(spark: SparkSession, source: SparkSource) -> dict[str, tuple[str, bool]]:
    """Each input column's type name and whether it is numeric (the schema; no rows read)."""
    from pyspark.sql import types as T

    return {f.name: (f.dataType.simpleString(), isinstance(f.dataType, T.NumericType)) for f in source.df.schema}


def read_keys(spark: SparkSession, keys: Any) -> pa.Table:
    """A public key set given as a Spark table name, a Spark DataFrame, a pandas DataFrame or an Arrow table."""
    from pyspark.errors import PySparkException
    from pyspark.sql import DataFrame

    try:
        if isinstance(keys, str):
            return spark.table(keys).toArrow()
        if isinstance(keys, DataFrame):
            return keys.toArrow()
        if hasattr(keys, "to_numpy"):
            return pa.Table.from_pandas(keys, preserve_index=False)
        if isinstance(keys, pa.Table):
            return keys
        raise TypeError(f"{type(keys).__name__} is not a key set")
    except (PySparkException, TypeError, ValueError, pa.ArrowException) as exc:
        raise not_a_key_set(keys, exc) from None


def keyset(engine: SparkStages, keys: pa.Table) -> DataFrame:
    """A frame over a key set given as Arrow columns `_dp_k<i>`."""
    return engine.spark.createDataFrame(keys)


def key_schema(engine: SparkStages) -> pa.Schema:
    """The Arrow types of the input's key columns under internal names (an empty collect)."""
    src = engine.source
    cols = [f"{spark_ref(n)} AS {k}" for n, k in zip(src.key_names, src.keys, strict=True)]
    return src.df.selectExpr(*cols).limit(0).toArrow().schema


def restrict(engine: SparkStages, plan: AggregatePlan, keys: DataFrame | None) -> DataFrame:
    """Stage 1: the input's rows (user, keys, value columns) whose key is in `keys` [agg_rows.sql], or every row
    with `keys` None (keys="threshold") [agg_all_rows.sql]."""
    src = engine.source
    key_select = ", ".join(f"{spark_ref(n)} AS {k}" for n, k in zip(src.key_names, src.keys, strict=True))
    values = "".join(f", {spark_ref(c)} AS _dp_v{j}" for j, c in enumerate(value_columns(plan)))
    fragments = {"user": spark_ref(src.user), "key_select": key_select, "values": values}
    if keys is None:
        return engine.template("agg_all_rows", {"source": src.df}, {}, fragments=fragments)
    return engine.template("agg_rows", {"source": src.df, "keyset": keys}, {},
                           fragments=fragments | {"match": engine.key_match("r", "k")})


def bound_keys(engine: SparkStages, plan: AggregatePlan, rows: DataFrame) -> DataFrame:
    """Stages 2–4: each (user, key) of `rows` once, with its row sample [agg_pairs.sql], each user's ≤ Δ0 pairs
    kept by the engine's keyed truncation, its salt drawn before the row sample's (as ./duckdb.py)."""
    trunc_salt = engine.randomness.salt()
    idents = measure_idents(plan, ", ".join(engine.keys), SPARK)
    pairs = engine.template("agg_pairs", {"rows": rows}, {"row_salt": engine.randomness.salt()}, subqueries=("rows",),
                            fragments={"ranks": idents["ranks"], "pair_measures": idents["pair_measures"]})
    return engine.truncate(engine.sized(pairs), plan.max_contributions, salt=trunc_salt)


def key_measures(engine: SparkStages, plan: AggregatePlan, keys: DataFrame) -> pa.Table:
    """Stages 1–5 for the key set `keys`: `measures` of `bound_keys` of `restrict`, one Spark plan (./duckdb.py
    truncates a key set under truncation="global" by key rank: the same pairs)."""
    return measures(engine, plan, bound_keys(engine, plan, restrict(engine, plan, keys)), keys)


def measures(engine: SparkStages, plan: AggregatePlan, kept: DataFrame, keys: DataFrame) -> pa.Table:
    """Stage 5 [agg_measures.sql]: per key of `keys` (sorted), its counter (`_dp_chi`, `_dp_clo`) and one
    exact integer per budgeted measure (`_dp_m<i>`), as ./duckdb.py's `measures`."""
    hi, lo, _ = counter_sql(keys.schema, engine.keys)
    idents = measure_idents(plan, ", ".join(engine.keys), SPARK)
    out = engine.template("agg_measures", {"kept": kept, "keyset": keys}, {}, subqueries=("kept",),
                          fragments={"measures": idents["measures"], "coalesced": idents["coalesced"],
                                     "counter_hi": hi, "counter_lo": lo, "group": ", ".join(engine.keys)})
    return out.toArrow()


def counters(engine: SparkStages, keys: DataFrame) -> pa.Table:
    """The keys' PRF counters in `measures`' row order [agg_counters.sql], as ./duckdb.py's `counters`."""
    hi, lo, _ = counter_sql(keys.schema, engine.keys)
    return engine.template("agg_counters", {"keyset": keys}, {},
                           fragments={"counter_hi": hi, "counter_lo": lo}).toArrow()


def user_counts(engine: SparkStages, plan: AggregatePlan) -> DataFrame:
    """keys="threshold" [agg_user_counts.sql]: every row bound once (one Δ0 truncation over all keys), then per key
    with c = distinct users − (pre_threshold − 1) ≥ 1 its counter, `_dp_c`, the budgeted measures of the same
    kept pairs and the counter's collision rank `_dp_rank` among these keys (`noise.partitioned_ranked`, on the
    executors, in `spark.sql.shuffle.partitions` partitions): the columns of ./duckdb.py's `user_counts`, as a
    frame that is never collected (nor stored: read once), in no particular order (the template's ORDER BY is
    DuckDB's stream order; Spark drops it)."""
    kept = bound_keys(engine, plan, restrict(engine, plan, None))
    hi, lo, may_collide = counter_sql(kept.schema, engine.keys)
    idents = measure_idents(plan, ", ".join(engine.keys), SPARK)
    out = engine.template("agg_user_counts", {"kept": kept}, {"shift": plan.pre_threshold - 1}, subqueries=("kept",),
                          fragments={"counter_hi": hi, "counter_lo": lo, "measures": idents["measures"],
                                     "coalesced": idents["coalesced"]})
    setting = str(engine.spark.conf.get("spark.sql.shuffle.partitions") or "")
    partitions = int(setting) if setting.isdigit() and int(setting) > 0 else 200    # else Spark's default
    return partitioned_ranked(out, engine.keys, may_collide, partitions)


def thresholded(engine: SparkStages, plan: AggregatePlan, rule: ThresholdRule, pool: DrawPool) -> pa.Table:
    """keys="threshold" (spec §4.2): the candidates of `user_counts` that `rule` keeps, with its `NOISY_USERS`
    column, sorted by key (`pool`, the driver's, unused: the executors draw in parallel already). The rule (noise
    and threshold per key) runs on the executors, batch by batch, as the
    select noise stage's decision does (duckdp/spark/noise.py `scan_noisy`): each key's draw is a function of
    (K, tag, counter, rank) only, so where a batch or partition ends changes nothing, and the driver collects
    only the keys released (what ./duckdb.py's stream keeps), never every candidate."""
    from pyspark.sql import types as T

    candidates = user_counts(engine, plan)
    schema = T.StructType([*candidates.schema.fields, T.StructField(NOISY_USERS, T.LongType(), False)])

    def keep(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield rule(batch)

    kept = candidates.mapInArrow(keep, schema)
    # the released keys in one partition, sorted there: the order of orderBy, without the sampling job that would
    # run the rule a second time (or a stored copy to spare it)
    return kept.repartition(1).sortWithinPartitions(*engine.keys).toArrow()


def draw_workers(engine: SparkStages) -> int:
    """Worker processes for the driver's exact draws (the measures of released keys; duckdp/draw_pool.py):
    `spark.driver.cores`, the cores the session gave its driver (1 unless set)."""
    return int(engine.spark.conf.get("spark.driver.cores", "1") or 1)


def pre_thresholded_weights(engine: SparkStages, max_contributions: int, pre_threshold: int) -> DataFrame:
    """The count selections' weights minus (pre_threshold − 1), keys at ≤ 0 dropped: the DuckDB template
    agg_pre_threshold.sql itself over basic_weights with exponent 0 (spec §4.4)."""
    weights = basic_weights(engine, max_contributions, 0.0)
    return engine.template("agg_pre_threshold", {"weights": weights}, {"shift": pre_threshold - 1},
                           subqueries=("weights",))
