"""`SparkStages`: the generic stages of the engine interface on Spark DataFrames.

The interface and its column contract are the stage library's (`duckdp/stages/base.py`); the
mechanisms run unchanged on it (`mech.run(SparkStages(...), plan, params)`): pairs → sized →
truncate → weights → release/decide → remove/store. A mechanism's own Spark stages live in its
folder (duckdp/mechanisms/<family>/spark.py). `decide` runs the mechanism's numpy rule on the
executors (`noise.scan_noisy`).
Each method computes what the DuckDB template named in its docstring computes, with the DataFrame
API; where a template's SQL is also Spark SQL, a stage runs the template itself (`template`:
`spark.sql` over temp views, values bound as named markers), so the formula exists once.

Truncation keeps, for each user over Δ0, the Δ0 keys of smallest `xxhash64(salt, user, keys…)`
(truncation="global": `xxhash64(salt, keys…)`, one secret order of the keys for every user) under a
fresh salt, ties broken by the key values so that a recomputed partition keeps the same subset: a
fixed function of the user's own data and a secret. Frames a mechanism
reads more than once are persisted (`store`) and unpersisted when the run closes.
"""
from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

import pyarrow as pa

from ..stages.base import Engine, NoisePlan, Rule
from ..templates import load
from ..validation import truncation as check_truncation
from .noise import noised, scan_noisy
from .source import SparkSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..rng import Randomness

_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")      # a template's bound value (duckdp/templates.py)


class SparkStages(Engine):
    """The stages of one Spark run: session, resolved input, randomness, persisted frames."""

    name = "spark"

    def __init__(self, spark: SparkSession, source: SparkSource, randomness: Randomness,
                 truncation: str = "per_user"):
        self.spark = spark
        self.source = source
        self.randomness = randomness
        self.truncation = check_truncation(truncation)
        self.keys = source.keys
        self._stored: list[DataFrame] = []
        self._run_id = secrets.token_hex(6)
        self._views: list[str] = []

    def template(self, name: str, frames: dict[str, DataFrame], params: dict,
                 subqueries: tuple[str, ...] = (), fragments: dict[str, str] | None = None) -> DataFrame:
        """Run the DuckDB template `name` itself on Spark (`spark.sql`), where its SQL is also Spark SQL:
        each frame in `frames` fills its identifier hole as a run-unique temp view (as `SELECT * FROM`
        it for the holes named in `subqueries`, which the template reads as a query), `{keys}` the
        internal key columns, `fragments` other holes (SQL duckdp builds, e.g. `key_match`), and each
        `$param` is bound as the named marker `:param` (values never pasted)."""
        template = load(name)
        idents = {"keys": ", ".join(self.keys)} if "keys" in template.idents else {}
        idents |= fragments or {}
        for hole, frame in frames.items():
            view = f"_duckdp_{self._run_id}_{hole}{len(self._views)}"
            frame.createOrReplaceTempView(view)
            self._views.append(view)
            idents[hole] = f"SELECT * FROM `{view}`" if hole in subqueries else f"`{view}`"
        text, bound = template.render(idents, params)
        return self.spark.sql(_PARAM.sub(r":\1", text), args=bound)

    def key_match(self, left: str, right: str) -> str:
        """Null-safe equality of all key columns between two aliases (as duckdp/run.py's, for templates)."""
        return " AND ".join(f"{left}.{k} IS NOT DISTINCT FROM {right}.{k}" for k in self.keys)

    # -- shared stages (sql/stage_pairs.sql, weights.sql, basic.sql, dpsips_*.sql) -----------------------
    def pairs(self) -> DataFrame:
        """Distinct (`_dp_user`, keys) pairs of the input."""
        return self.source.pairs()

    def sized(self, pairs: DataFrame) -> DataFrame:
        """`pairs` with `_dp_size` = |W_u| (a window per user; sql/stage_sized.sql)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        return pairs.withColumn("_dp_size", F.count(F.lit(1)).over(Window.partitionBy("_dp_user")))

    def truncate(self, sized: DataFrame, max_contributions: int, salt: int | None = None) -> DataFrame:
        """Each user's Δ0 pairs of smallest keyed hash of (user, key), or of the key under truncation="global",
        under a fresh salt (or `salt`, drawn by the caller from the run's randomness): the carried columns plus
        `_dp_d` = min(|W_u|, Δ0) (sql/stage_truncate_window.sql)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        salt = self.randomness.salt() if salt is None else salt
        user = [] if self.truncation == "global" else [F.col("_dp_user")]
        order = Window.partitionBy("_dp_user").orderBy(
            F.xxhash64(F.lit(salt), *user, *[F.col(k) for k in self.keys]), *self.keys)
        carried = [c for c in sized.columns if c != "_dp_size"]
        return (sized.withColumn("_dp_rank", F.row_number().over(order))
                .where(F.col("_dp_rank") <= max_contributions)
                .select(*carried, F.least(F.col("_dp_size"), F.lit(max_contributions)).cast("double").alias("_dp_d")))

    def contribution_histogram(self, pairs: DataFrame, edges: list[int]) -> list[tuple[int, int]]:
        """Users per bucket edges[b] ≤ |W_u| < edges[b+1], the last open-ended
        (sql/stage_contribution_histogram.sql)."""
        from pyspark.sql import functions as F

        size = F.col("_dp_size")
        bucket = F.lit(0)
        for b, edge in enumerate(edges[1:], start=1):      # edges ascend: the last edge ≤ |W_u| wins
            bucket = F.when(size >= F.lit(int(edge)), F.lit(b)).otherwise(bucket)
        rows = (pairs.groupBy("_dp_user").agg(F.count(F.lit(1)).alias("_dp_size"))
                .groupBy(bucket.alias("_dp_bucket")).agg(F.count(F.lit(1)).alias("_dp_users")).collect())
        return sorted((int(r["_dp_bucket"]), int(r["_dp_users"])) for r in rows)

    def weights(self, kept: DataFrame, exponent: float) -> DataFrame:
        """Per key Σ `_dp_d`^(−exponent) over the users who kept it (Gopi et al. ICML 2020 §1.1)."""
        from pyspark.sql import functions as F

        return kept.groupBy(*self.keys).agg(F.sum(F.pow(F.col("_dp_d"), F.lit(-exponent))).alias("_dp_w"))

    def release(self, weights: DataFrame, plan: NoisePlan) -> DataFrame:
        """Keys whose weight plus plan.scale × fresh keyed noise reaches plan.threshold (sql/noise_scan.sql)."""
        from pyspark.sql import functions as F

        z = noised(self, weights, plan.noise)
        return z.where(F.col("_dp_w") + F.lit(plan.scale) * F.col("_dp_z") >= F.lit(plan.threshold)).select(*self.keys)

    def decide(self, weights: DataFrame, plan: NoisePlan, rule: Rule, added: dict[str, str],
               round_tag: int | None = None) -> DataFrame:
        """Noise on every key of `weights` and the mechanism's numpy `rule` on the executors
        (noise.scan_noisy): the kept keys plus the `added` columns; `round_tag` as in `Engine.decide`."""
        return scan_noisy(self, weights, plan.noise, plan.scale, rule, added, round_tag)

    def remove(self, pairs: DataFrame, keys: DataFrame) -> DataFrame:
        """Pairs whose key is not in `keys` (DP-SIPS Alg. 3 line 9; keys are never NULL)."""
        return pairs.join(keys, on=self.keys, how="left_anti")

    def store(self, frame: DataFrame, name: str = "") -> DataFrame:
        """Persist `frame` (memory, spilling to disk) until the run closes."""
        from pyspark import StorageLevel

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self._stored.append(frame)
        return frame

    def empty_keys(self, like: DataFrame) -> DataFrame:
        return self.spark.createDataFrame([], like.select(*self.keys).schema)

    def append(self, stored: DataFrame, keys: DataFrame) -> tuple[DataFrame, int]:
        """`stored` ∪ `keys` and the number added: the new keys are collected once (released keys are
        few), which also cuts the lineage between DP-SIPS rounds."""
        new = keys.select(*self.keys).toArrow()
        added = self.spark.createDataFrame(new, schema=stored.schema) if new.num_rows else None
        return (stored if added is None else stored.unionByName(added)), new.num_rows

    def union(self, first: DataFrame, second: DataFrame) -> DataFrame:
        return first.unionByName(second)

    def output(self, keys: DataFrame) -> pa.Table:
        """The released keys under the input's column names, as Arrow (computed once), sorted by the key
        columns (sql/stage_output.sql): the order is a function of the released set alone."""
        return keys.select(*self.keys).orderBy(*self.keys).toArrow().rename_columns(self.source.key_names)

    def num_rows(self, table: pa.Table) -> int:
        return table.num_rows

    def drop(self, frame: DataFrame) -> None:
        frame.unpersist()

    def close(self) -> None:
        """Unpersist every stored frame, whatever happened."""
        for frame in self._stored:
            try:
                frame.unpersist()
            except Exception:
                pass
        self._stored.clear()
        for view in self._views:
            try:
                self.spark.catalog.dropTempView(view)
            except Exception:
                pass
        self._views.clear()
