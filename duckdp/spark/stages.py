"""`SparkStages`: every stage of the engine interface on Spark DataFrames.

The interface and its column contract are the stage library's (`duckdp/stages/base.py`); the
mechanisms run unchanged on it (`mech.run(SparkStages(...), plan, params)`): pairs → sized →
truncate → weights → release → remove/store, plus the MAD/MAD2R, adaptive SIPS, truncated
geometric and count-release stages. Decisions on noisy weights (MAD2R's screen, adaptive SIPS's
state) run the mechanism's own numpy rule on the executors (`noise.scan_noisy`).
Each method computes what the DuckDB template named in its docstring computes, with the DataFrame
API (no SQL text, no translated templates).

Truncation keeps, for each user over Δ0, the Δ0 keys of smallest `xxhash64(salt, user, keys…)`
under a fresh salt, ties broken by the key values so that a recomputed partition keeps the same
subset: a uniform subset, a fixed function of the user's own data and a secret. Frames a mechanism
reads more than once are persisted (`store`) and unpersisted when the run closes. Sequential
policies have no Spark stages: they process users one after another.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import InvalidParameter
from ..stages.base import Stages
from .noise import noised, scan_noisy
from .source import SparkSource

SEQUENTIAL_ERROR = ("the sequential policies (policy_*, gw) process users one after another and run only on "
                    "DuckDB; on Spark use weighted_gaussian, dpsips, adaptive_sips, mad or mad2r")


class SparkStages(Stages):
    """The stages of one Spark run: session, resolved input, randomness, persisted frames."""

    engine = "spark"

    def __init__(self, spark, source: SparkSource, randomness):
        self.spark = spark
        self.source = source
        self.randomness = randomness
        self.keys = source.keys
        self._stored: list = []

    # -- shared stages (sql/stage_pairs.sql, weights.sql, basic.sql, dpsips_*.sql) -----------------------
    def pairs(self):
        """Distinct (`_dp_user`, keys) pairs of the input."""
        return self.source.pairs()

    def sized(self, pairs):
        """`pairs` with `_dp_size` = |W_u| (a window per user; sql/stage_sized.sql)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        return pairs.withColumn("_dp_size", F.count(F.lit(1)).over(Window.partitionBy("_dp_user")))

    def truncate(self, sized, max_contributions: int):
        """Each user's Δ0 pairs of smallest keyed hash under a fresh salt: the carried columns plus
        `_dp_d` = min(|W_u|, Δ0) (sql/stage_weights.sql, mad_bounded.sql, mad2r_bounded.sql)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        salt = self.randomness.salt()
        order = Window.partitionBy("_dp_user").orderBy(
            F.xxhash64(F.lit(salt), F.col("_dp_user"), *[F.col(k) for k in self.keys]), *self.keys)
        carried = [c for c in sized.columns if c != "_dp_size"]
        return (sized.withColumn("_dp_rank", F.row_number().over(order))
                .where(F.col("_dp_rank") <= max_contributions)
                .select(*carried, F.least(F.col("_dp_size"), F.lit(max_contributions)).cast("double").alias("_dp_d")))

    def contribution_histogram(self, pairs, edges: list[int]) -> list[tuple[int, int]]:
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

    def weights(self, kept, exponent: float):
        """Per key Σ `_dp_d`^(−exponent) over the users who kept it (Gopi et al. ICML 2020 §1.1)."""
        from pyspark.sql import functions as F

        return kept.groupBy(*self.keys).agg(F.sum(F.pow(F.col("_dp_d"), F.lit(-exponent))).alias("_dp_w"))

    def release(self, weights, plan):
        """Keys whose weight plus plan.scale × fresh keyed noise reaches plan.threshold (sql/noise_scan.sql)."""
        from pyspark.sql import functions as F

        z = noised(self, weights, plan.noise)
        return z.where(F.col("_dp_w") + F.lit(plan.scale) * F.col("_dp_z") >= F.lit(plan.threshold)).select(*self.keys)

    def remove(self, pairs, keys):
        """Pairs whose key is not in `keys` (DP-SIPS Alg. 3 line 9; keys are never NULL)."""
        return pairs.join(keys, on=self.keys, how="left_anti")

    def store(self, frame, name: str = ""):
        """Persist `frame` (memory, spilling to disk) until the run closes."""
        from pyspark import StorageLevel

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self._stored.append(frame)
        return frame

    def empty_keys(self, like):
        return self.spark.createDataFrame([], like.select(*self.keys).schema)

    def append(self, stored, keys):
        """`stored` ∪ `keys` and the number added: the new keys are collected once (released keys are
        few), which also cuts the lineage between DP-SIPS rounds."""
        new = keys.select(*self.keys).toArrow()
        added = self.spark.createDataFrame(new, schema=stored.schema) if new.num_rows else None
        return (stored if added is None else stored.unionByName(added)), new.num_rows

    def union(self, first, second):
        return first.unionByName(second)

    def output(self, keys) -> pa.Table:
        """The released keys under the input's column names, as Arrow (computed once), sorted by the key
        columns (sql/stage_output.sql): the order is a function of the released set alone."""
        return keys.select(*self.keys).orderBy(*self.keys).toArrow().rename_columns(self.source.key_names)

    def num_rows(self, table: pa.Table) -> int:
        return table.num_rows

    def drop(self, frame) -> None:
        frame.unpersist()

    # -- MAD / MAD2R (sql/mad_*.sql, mad2r_*.sql; spec docs/specs/mad-mad2r.md) ---------------------------
    def mad_vectors(self, kept):
        """Stored user vectors with w^u_i = 1/√d_u (sql/mad_vectors.sql; spec §2 step 1, §4)."""
        from pyspark.sql import functions as F

        return self.store(kept.select("_dp_user", *self.keys, "_dp_d", (1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw")))

    def mad_weights(self, vectors, plan):
        """MAD stages 1–4 (sql/mad_weights.sql; spec §5): truncate at τ, return excess, reroute f."""
        from pyspark.sql import functions as F

        keys, d, uw = self.keys, F.col("_dp_d"), F.col("_dp_uw")
        adaptive = d.between(plan.extra.min_degree, plan.extra.max_degree)
        tau = F.lit(plan.extra.tau)
        initial = vectors.where(adaptive).groupBy(*keys).agg(F.sum(uw / F.sqrt(d)).alias("_dp_init"))
        truncated = (initial.where(F.col("_dp_init") > tau)
                     .select(*keys, ((F.col("_dp_init") - tau) / F.col("_dp_init")).alias("_dp_ratio")))
        excess = (vectors.where(adaptive).join(truncated, keys).groupBy("_dp_user")
                  .agg(F.sum(F.col("_dp_ratio") * uw / F.sqrt(d)).alias("_dp_e")))
        rerouted = F.when(adaptive, F.lit(plan.extra.reroute) * F.coalesce(F.col("_dp_e"), F.lit(0.0)) * uw
                          + (1 - 1 / F.sqrt(d)) * uw).otherwise(uw)
        return (vectors.join(excess, "_dp_user", "left").groupBy(*keys)
                .agg((F.least(F.coalesce(F.sum(F.when(adaptive, uw / F.sqrt(d))), F.lit(0.0)), tau)
                      + F.sum(rerouted)).alias("_dp_w")))

    def mad2r_screen(self, pairs, vectors, plan1, plan2, max_contributions: int):
        """Round-1 noisy weights ŵ1 on the whole universe (∪S̃_u and the keys of users over Δ0;
        sql/mad2r_universe.sql), MAD2R's decisions by the mechanism's numpy rule
        (mechanisms.mad.screen_round1), and only the exceptions (released, removed or biased) stored."""
        from pyspark.sql import functions as F

        from ..mechanisms.mad import screen_round1  # the mechanism's rule; engines only run it

        big = pairs.where(F.col("_dp_size") > max_contributions).select(*self.keys).distinct()
        universe = self.mad_weights(vectors, plan1).join(big, self.keys, "full")

        def exceptions_of(w, noisy):
            decided = screen_round1(w, noisy, plan1, plan2)
            return ~decided["_dp_round2"] | (decided["_dp_beta"] < 1), decided

        added = {"_dp_released": "boolean", "_dp_round2": "boolean", "_dp_beta": "double"}
        return self.store(scan_noisy(self, universe, plan1.noise, plan1.scale, exceptions_of, added))

    def mad2r_vectors(self, pairs, status, max_contributions: int, beta_min: float, beta_max: float):
        """Stored round-2 user vectors (sql/mad2r_vectors.sql + mad2r_biased.sql; spec §4, §6): round-2
        pairs re-cut to Δ0, 1/√d for users without a bias below 1, water-filling λ* for the others."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = self.keys
        b = F.greatest(F.least(F.coalesce(F.col("_dp_beta"), F.lit(1.0)), F.lit(1.0)), F.lit(beta_min))
        user = Window.partitionBy("_dp_user")
        remaining = (pairs.drop("_dp_size").join(status, keys, "left")
                     .where(F.col("_dp_round2").isNull() | F.col("_dp_round2"))
                     .select("_dp_user", *keys, b.alias("_dp_b"))
                     .withColumn("_dp_biased", F.max((F.col("_dp_b") < 1).cast("int")).over(user) == 1))
        kept = self.truncate(self.sized(remaining), max_contributions)
        kept = kept.withColumn("_dp_v", F.col("_dp_b") / F.sqrt(F.col("_dp_d")))
        out = ["_dp_user", *keys, "_dp_d", "_dp_v"]
        plain = kept.where(~F.col("_dp_biased")).select(*out, (1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw"),
                                                        "_dp_biased")
        order = user.orderBy(F.col("_dp_v").desc(), *keys)
        v, prev, cap = F.col("_dp_v"), F.col("_dp_prev"), F.col("_dp_cap")
        ordered = (kept.where(F.col("_dp_biased"))
                   .withColumn("_dp_r", F.row_number().over(order))
                   .withColumn("_dp_tail", F.sum(v * v).over(order.rowsBetween(Window.currentRow,
                                                                                 Window.unboundedFollowing)))
                   .withColumn("_dp_prev", F.lag(v).over(order))
                   .withColumn("_dp_cap", F.lit(beta_max) / F.sqrt(F.col("_dp_d"))))
        room = 1 - (F.col("_dp_r") - 1) * cap * cap          # λ_r when the r−1 largest are capped
        lam = F.when(room > 0, F.sqrt(room / F.col("_dp_tail")))
        valid = (lam * v <= cap * (1 + 1e-9)) & (prev.isNull() | (lam * prev >= cap * (1 - 1e-9)))
        solved = ordered.withColumn("_dp_lambda", F.min(F.when(valid, lam)).over(user))
        biased = solved.select(*out, F.coalesce(F.least(F.col("_dp_lambda") * v, cap),
                                                1.0 / F.sqrt(F.col("_dp_d"))).alias("_dp_uw"), "_dp_biased")
        return self.store(plain.unionByName(biased))

    def mad2r_released(self, status):
        from pyspark.sql import functions as F

        return status.where(F.col("_dp_released")).select(*self.keys)

    # -- adaptive SIPS (sql/adaptive_sips_*.sql; spec docs/specs/adaptive-sips.md) -----------------------
    def adaptive_sips_remaining(self, pairs, state):
        """R_u with each key's level: all pairs at level 1 in round 1, else the pairs whose key is in play."""
        from pyspark.sql import functions as F

        if state is None:
            return pairs.withColumn("_dp_level", F.lit(1.0))
        return pairs.join(state.where(F.col("_dp_level") > 0).select(*self.keys, "_dp_level"), self.keys)

    def adaptive_sips_vectors(self, kept, cap: float):
        """Each user's capped unit-norm vector over R̃_u (sql/adaptive_sips_vectors.sql): level-1 entries
        min(1/√Σl², c/√d), lower levels scaled to the remaining norm, every entry capped at c/√d."""
        from pyspark.sql import functions as F

        lvl, d = F.col("_dp_level"), F.col("_dp_d")
        stats = kept.groupBy("_dp_user").agg(
            F.sum(lvl * lvl).alias("_dp_ss"), F.count(F.when(lvl >= 1.0, 1)).alias("_dp_nhi"),
            F.coalesce(F.sum(F.when(lvl < 1.0, lvl * lvl)), F.lit(0.0)).alias("_dp_sslo"))
        capped = F.lit(cap) / F.sqrt(d)
        scaled = kept.join(stats, "_dp_user").withColumn("_dp_hi", F.least(1.0 / F.sqrt(F.col("_dp_ss")), capped))
        low = F.least(lvl * F.sqrt(F.greatest(1.0 - F.col("_dp_nhi") * F.col("_dp_hi") * F.col("_dp_hi"), F.lit(0.0))
                                   / F.col("_dp_sslo")), capped)
        return scaled.select("_dp_user", *self.keys, F.when(lvl >= 1.0, F.col("_dp_hi")).otherwise(low).alias("_dp_x"))

    def adaptive_sips_weights(self, vectors):
        from pyspark.sql import functions as F

        return vectors.groupBy(*self.keys).agg(F.sum("_dp_x").alias("_dp_w"))

    def adaptive_sips_state(self, remaining, vectors, state, plan, params: dict, index: int):
        """Noise on every key of ∪R_u (sql/adaptive_sips_universe.sql), the mechanism's rule
        (mechanisms.adaptive_sips.next_state) on the executors → stored state (keys in play or released
        this round, plus those released earlier) and the number released this round."""
        from pyspark.sql import functions as F

        from ..mechanisms.adaptive_sips import next_state  # the mechanism's rule; engines only run it

        universe = remaining.select(*self.keys).distinct().join(self.adaptive_sips_weights(vectors), self.keys, "left")

        def decide(w, noisy):
            released, level = next_state(w, noisy, plan, params)
            return (level > 0) | released, {"_dp_level": level, "_dp_released": released}

        decided = self.store(scan_noisy(self, universe, plan.noise, plan.scale, decide,
                                        {"_dp_level": "double", "_dp_released": "boolean"}))
        count = decided.where(F.col("_dp_released")).count()
        new = decided.select(*self.keys, "_dp_level",
                             F.when(F.col("_dp_released"), F.lit(index)).cast("int").alias("_dp_round"))
        if state is not None:           # the keys earlier rounds released stay in the output
            new = new.unionByName(state.where(F.col("_dp_round").isNotNull()))
        return self.store(new), int(count)

    def adaptive_sips_released(self, state):
        from pyspark.sql import functions as F

        return state.where(F.col("_dp_round").isNotNull()).select(*self.keys)

    # -- truncated geometric and count release ---------------------------------------------------------
    def geometric_release(self, weights, keep_prob: np.ndarray):
        """Keys kept with probability π(n) by one keyed uniform draw (sql/truncated_geometric.sql)."""
        from pyspark.sql import functions as F

        probs = self.spark.createDataFrame(pa.table({"_dp_n": pa.array(np.arange(1, len(keep_prob) + 1), pa.int64()),
                                                     "_dp_p": pa.array(keep_prob, pa.float64())}))
        drawn = noised(self, weights, "uniform", "_dp_u")
        return (drawn.withColumn("_dp_n", F.round(F.col("_dp_w")).cast("long"))
                .join(F.broadcast(probs), "_dp_n", "left")
                .where(F.col("_dp_u") < F.coalesce(F.col("_dp_p"), F.lit(1.0))).select(*self.keys))

    def top_counts(self, top: int) -> pa.Table:
        """The `top` largest distinct-user counts (keys, `_dp_count`), ties in keyed-hash order
        (sql/pcr_top_counts.sql)."""
        from pyspark.sql import functions as F

        tie = F.xxhash64(F.lit(self.randomness.salt()), *[F.col(k) for k in self.keys])
        return (self.pairs().groupBy(*self.keys).agg(F.count(F.lit(1)).alias("_dp_count"))
                .orderBy(F.col("_dp_count").desc(), tie, *self.keys).limit(top).toArrow())

    # -- sequential policies: DuckDB only ---------------------------------------------------------------
    def policy_pairs(self, counted: bool, max_contributions: int):
        raise InvalidParameter(SEQUENTIAL_ERROR)

    def count_users(self, pairs) -> int:
        raise InvalidParameter(SEQUENTIAL_ERROR)

    def policy_lists(self, pairs, items, batch_users: int):
        raise InvalidParameter(SEQUENTIAL_ERROR)

    def policy_release(self, weights: np.ndarray, items, plan):
        raise InvalidParameter(SEQUENTIAL_ERROR)

    def close(self) -> None:
        """Unpersist every stored frame, whatever happened."""
        for frame in self._stored:
            try:
                frame.unpersist()
            except Exception:
                pass
        self._stored.clear()
