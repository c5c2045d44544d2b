"""The shared data stages on Spark DataFrames: truncate → weights → noise + threshold → remove.

Each stage takes and returns DataFrames with duckdp's internal columns (`_dp_user`, the key
columns `_dp_k0, …`, `_dp_w` for a key's weight) and computes what the DuckDB template named in
its docstring computes. Truncation keeps, for each user over Δ0, the Δ0 keys of smallest keyed
hash `xxhash64(salt, user, keys…)` (ties broken by the key values so that a recomputed partition
keeps the same subset): a uniform subset, a fixed function of the user's own data and a secret salt.
"""
from __future__ import annotations

from ..rng import Randomness
from .noise import standard_draws


def truncate(pairs, keys: list[str], max_contributions: int, salt: int, carry: tuple[str, ...] = ()):
    """Kept (user, key) pairs, at most Δ0 per user, with `_dp_d` = the user's kept count and the
    `carry` columns (the truncation of sql/weights.sql, mad_bounded.sql and mad2r_bounded.sql)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    user = Window.partitionBy("_dp_user")
    order = user.orderBy(F.xxhash64(F.lit(salt), F.col("_dp_user"), *[F.col(k) for k in keys]), *keys)
    return (pairs.withColumn("_dp_size", F.count(F.lit(1)).over(user))
            .withColumn("_dp_rank", F.row_number().over(order))
            .where(F.col("_dp_rank") <= max_contributions)
            .select("_dp_user", *keys, *carry, F.least(F.col("_dp_size"), F.lit(max_contributions)).cast("double").alias("_dp_d")))


def weights(pairs, keys: list[str], max_contributions: int, exponent: float, randomness: Randomness):
    """Per-key weights `_dp_w` = Σ over kept users of d_u^(−exponent), truncated to Δ0 with a fresh
    salt (sql/weights.sql: ½ weighted Gaussian, 1 weighted Laplace, 0 counts)."""
    from pyspark.sql import functions as F

    kept = truncate(pairs, keys, max_contributions, randomness.salt())
    return kept.groupBy(*keys).agg(F.sum(F.pow(F.col("_dp_d"), F.lit(-exponent))).alias("_dp_w"))


def noise_threshold(weighted, keys: list[str], kind: str, scale: float, threshold: float,
                    randomness: Randomness):
    """Keys whose weight plus scale × a fresh standard `kind` draw clears `threshold` (sql/basic.sql)."""
    from pyspark.sql import functions as F

    noised = standard_draws(weighted, keys, kind, randomness)
    return noised.where(F.col("_dp_w") + F.lit(scale) * F.col("_dp_z") >= F.lit(threshold)).select(*keys)


def remove(pairs, released, keys: list[str]):
    """Pairs whose key is not in `released` (sql/dpsips_remaining.sql; keys are never NULL)."""
    return pairs.join(released, on=keys, how="left_anti")
