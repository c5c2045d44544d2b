"""Per-key noise on Spark: one standard draw per key, keyed by the run's secret randomness.

This is the one place the Spark engine draws noise (`standard_draws`); everything else scales and
thresholds the column it adds. The draw is a function of the run's secret key and an injective
text encoding of the key only (no Spark `hash`, which is 32-bit Murmur3), evaluated in a
vectorised `pandas_udf`, so recomputing a lost partition gives the same noise.

Counter: the first 60 bits of MD5(salt ‖ len(v₀):v₀ ‖ len(v₁):v₁ ‖ …) over the key columns cast
to text (binary as hex, nested types as JSON), computed natively by Spark; the salt is fresh per
round. The numpy side is `Randomness.<kind>` (duckdp/rng.py), the same generator as DuckDB's UDFs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd     # a pyspark dependency; module-level so pandas_udf resolves the type hints

from ..rng import Randomness
from ..udfs import KINDS


def _text(col, dtype):
    """An injective text form of one key column of Spark type `dtype`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.BinaryType):
        return F.hex(col)
    if isinstance(dtype, (T.ArrayType, T.MapType, T.StructType)):
        return F.to_json(col)
    return col.cast("string")


def key_counter(df, keys: list[str], salt: int):
    """A 60-bit counter column per key: MD5 of the salt and a length-prefixed key encoding."""
    from pyspark.sql import functions as F

    parts = [F.lit(f"{salt}|")]
    for k in keys:
        text = _text(F.col(k), df.schema[k].dataType)
        parts += [F.length(text).cast("string"), F.lit(":"), text]
    return F.conv(F.substring(F.md5(F.concat(*parts)), 1, 15), 16, 10).cast("long")


def standard_draws(df, keys: list[str], kind: str, randomness: Randomness, name: str = "_dp_z"):
    """`df` with column `name`: one standard `kind` draw (N(0,1), Lap(0,1), Gumbel, U(0,1)) per key."""
    from pyspark.sql.functions import pandas_udf

    if kind not in KINDS:
        raise ValueError(f"unknown noise kind {kind!r}")
    sample = getattr(randomness, kind)

    @pandas_udf("double")
    def draw(counter: pd.Series) -> pd.Series:
        return pd.Series(sample(counter.to_numpy(dtype=np.int64).astype(np.uint64)))

    return df.withColumn(name, draw(key_counter(df, keys, randomness.salt())))
