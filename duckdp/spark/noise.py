"""Per-key noise on Spark: each key's 128-bit PRF counter computed natively, the draw in a pandas_udf.

Counters follow the DuckDB noise stage (duckdp/counters.py in the PRF noise module) exactly, so a
seeded release draws the same noise for the same key on both engines:
- one integer key column: the integer as 128-bit two's complement (hi = −1 or 0, lo = its bits);
- otherwise MD5 of enc = ‖_i octet_length(s_i) ':' s_i with s_i the column as text (binary as
  upper-case hex), hi/lo = digest bytes 0–7 / 8–15 read little-endian (DuckDB's
  md5_number_upper/lower). Integer and string columns encode identically on both engines.
Digest counters shared by several keys present are detected and ranked by key value; rank r > 0
draws from its own sub-key, so distinct keys always get independent noise. Spark's `hash` (32-bit
Murmur3) is never used for noise. The draw is a pure function of (release key, round, counter,
rank), so recomputing a lost partition reproduces it; the release key travels to the executors
inside the UDF, like the data it protects.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd  # a pyspark dependency; module-level so pandas_udf resolves the type hints
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

    from ..rng import Randomness
    from ..stages.base import Rule


class _Run(Protocol):
    """What the noise needs of a Spark run (a `SparkStages`; not imported: it imports this module)."""

    @property
    def randomness(self) -> Randomness: ...

    @property
    def keys(self) -> list[str]: ...

    def store(self, frame: DataFrame, name: str = "") -> DataFrame: ...


_INTEGRAL = ("ByteType", "ShortType", "IntegerType", "LongType")


def _u64(x: pd.Series | np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.int64).view(np.uint64)


def standard(kind: str, randomness: Randomness, tag: int, hi: np.ndarray, lo: np.ndarray,
             ranks: np.ndarray) -> np.ndarray:
    """THE noise call: `Randomness.noise` (duckdp/prf.py), the DuckDB noise stage's own function."""
    return randomness.noise(kind, tag, _u64(hi), _u64(lo), np.asarray(ranks, dtype=np.int64), threads=1)


def _text(col: str, dtype: DataType) -> str:
    """The column as text (binary as upper-case hex, as DuckDB's hex(BLOB); nested types as JSON)."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.BinaryType):
        return f"hex({col})"
    if isinstance(dtype, (T.ArrayType, T.MapType, T.StructType)):
        return f"to_json({col})"
    return f"CAST({col} AS STRING)"


def _le64(md5_hex: str, start: int) -> str:
    """Digest bytes start..start+7 (0-based, of the hex string `md5_hex`) read little-endian, as a signed long."""
    rev = ", ".join(f"substring({md5_hex}, {2 * (start + b) + 1}, 2)" for b in range(7, -1, -1))
    return f"CAST(conv(concat({rev}), 16, -10) AS BIGINT)"   # a negative target base reads the 64 bits as signed


def counter_sql(schema: StructType, keys: list[str]) -> tuple[str, str, bool]:
    """(hi, lo, may_collide): Spark SQL of the 128-bit counter of the key columns `keys` of a frame with
    `schema` (the expressions name only those columns; templates use them as fragments)."""
    # imported here: .source imports DuckDB, which the workers running this module's UDFs never need
    from .source import spark_ref

    types = [schema[k].dataType for k in keys]
    if len(keys) == 1 and type(types[0]).__name__ in _INTEGRAL:
        k = f"CAST({spark_ref(keys[0])} AS BIGINT)"
        return f"CAST(CASE WHEN {k} < 0 THEN -1 ELSE 0 END AS BIGINT)", k, False
    parts = []
    for name, t in zip(keys, types, strict=True):
        s = _text(spark_ref(name), t)
        parts += [f"CAST(octet_length({s}) AS STRING)", "':'", s]
    digest = f"md5(concat({', '.join(parts)}))"
    return _le64(digest, 0), _le64(digest, 8), True


def counters(df: DataFrame, keys: list[str]) -> tuple[Column, Column, bool]:
    """(hi, lo, may_collide): the 128-bit counter columns of the key columns `keys` of `df`."""
    from pyspark.sql import functions as F

    hi, lo, may_collide = counter_sql(df.schema, keys)
    return F.expr(hi), F.expr(lo), may_collide


def ranked(stages: _Run, frame: DataFrame, may_collide: bool) -> DataFrame:
    """`frame` (one row per key, with its counter `_dp_chi`, `_dp_clo`) plus `_dp_rank` (long): each key's
    collision rank among the keys of `frame` sharing its counter, by key value, 0 for the rest (all 0 where
    the counters cannot collide: `may_collide` False). The definition of duckdp/counters.py, computed on the
    executors (DuckDB's twin: sql/noise_scan_ranked.sql); `frame` is stored, as it is read twice."""
    from pyspark.sql import functions as F

    keys = stages.keys
    if may_collide:             # counters held by more than one key present: rank them by key value
        frame = stages.store(frame)
        dup = frame.groupBy("_dp_chi", "_dp_clo").count().where(F.col("count") > 1).drop("count")
        if dup.limit(1).count():
            ranks = frame.join(dup, ["_dp_chi", "_dp_clo"]).select(*keys, _collision_rank(keys).alias("_dp_rank"))
            return (frame.join(ranks, keys, "left")
                    .withColumn("_dp_rank", F.coalesce(F.col("_dp_rank"), F.lit(0)).cast("long")))
    return frame.withColumn("_dp_rank", F.lit(0).cast("long"))


def partitioned_ranked(frame: DataFrame, keys: list[str], may_collide: bool, partitions: int) -> DataFrame:
    """`ranked`'s `_dp_rank` for a frame read once (keys="threshold"'s candidates): the rows hash-partitioned
    into `partitions` by counter, so keys sharing a counter meet in one partition, and ranked there by a window
    over the counter ordered by key value (one shuffle; nothing stored and no job of its own, where `ranked`
    stores the frame and counts duplicates first). The repartition also lets Spark drop a sort that `frame`'s
    query ends with (its optimizer's EliminateSorts: an order nothing here reads). A fixed `partitions` keeps the
    per-key work downstream spread over the executors (AQE would coalesce a small frame into one task)."""
    from pyspark.sql import functions as F

    frame = frame.repartition(partitions, "_dp_chi", "_dp_clo")
    rank = _collision_rank(keys) if may_collide else F.lit(0)
    return frame.withColumn("_dp_rank", rank.cast("long"))


def _collision_rank(keys: list[str]) -> Column:
    """A key's rank by key value among the keys of its frame that share its counter (duckdp/counters.py's
    definition; DuckDB's twin: sql/noise_scan_ranked.sql)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    return F.row_number().over(Window.partitionBy("_dp_chi", "_dp_clo").orderBy(*keys)) - 1


def noised(stages: _Run, frame: DataFrame, kind: str, name: str = "_dp_z", round_tag: int | None = None) -> DataFrame:
    """`frame` (one row per key) with column `name`: a standard `kind` draw per key, under a fresh round
    tag or `round_tag` (one the caller drew: the same draws for the same keys, counters permitting)."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    randomness = stages.randomness
    tag = randomness.next_round() if round_tag is None else round_tag
    hi, lo, may_collide = counters(frame, stages.keys)
    frame = ranked(stages, frame.withColumn("_dp_chi", hi).withColumn("_dp_clo", lo), may_collide)

    @pandas_udf("double")  # type: ignore[call-overload, unused-ignore]  # stubs lack the hinted form; no stubs without pyspark
    def draw(chi: pd.Series, clo: pd.Series, rk: pd.Series) -> pd.Series:
        return pd.Series(standard(kind, randomness, tag, chi.to_numpy(), clo.to_numpy(), rk.to_numpy()))

    return (frame.withColumn(name, draw(F.col("_dp_chi"), F.col("_dp_clo"), F.col("_dp_rank")))
            .drop("_dp_chi", "_dp_clo", "_dp_rank"))


def scan_noisy(stages: _Run, weights: DataFrame, kind: str, scale: float, choose: Rule,
               added: dict[str, str], round_tag: int | None = None) -> DataFrame:
    """The Spark twin of duckdp.noise_stage.scan_noisy: noisy = weight (0 where NULL) + scale · fresh
    `kind` noise per key, and `choose(weights, noisy)` (weights NaN where NULL; the mechanism's numpy
    rule) run batch by batch on the executors. Returns the rows it keeps: keys plus the `added`
    columns (name → Spark SQL type). `round_tag`: as in `noised`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    _TYPES = {"boolean": T.BooleanType, "double": T.DoubleType, "int": T.IntegerType}
    keys = stages.keys
    z = noised(stages, weights, kind, round_tag=round_tag)
    frame = z.select(*keys, F.col("_dp_w").cast("double").alias("_dp_w"),
                     (F.coalesce(F.col("_dp_w"), F.lit(0.0)) + F.lit(scale) * F.col("_dp_z")).alias("_dp_noisy"))
    schema = T.StructType([frame.schema[k] for k in keys]
                          + [T.StructField(n, _TYPES[t]()) for n, t in added.items()])

    def decide(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            w = batch.column("_dp_w").to_numpy(zero_copy_only=False).astype(np.float64)
            noisy = batch.column("_dp_noisy").to_numpy(zero_copy_only=False).astype(np.float64)
            mask, extra = choose(w, noisy)
            keep = pa.array(np.asarray(mask, bool), pa.bool_())
            cols = [batch.column(k).filter(keep) for k in keys]
            cols += [pa.array(np.asarray(extra[n])[np.asarray(mask, bool)]) for n in added]
            yield pa.RecordBatch.from_arrays(cols, names=[*keys, *added])

    return frame.mapInArrow(decide, schema)
