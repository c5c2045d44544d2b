"""SparkRun: the session, resolved input and randomness of one release; cached frames unpersisted in `close()`."""
from __future__ import annotations

import pyarrow as pa

from ..rng import Randomness
from .source import SparkSource


class SparkRun:
    """What a Spark mechanism run needs; `pairs()` reads the input's distinct pairs once per run."""

    def __init__(self, spark, source: SparkSource, randomness: Randomness):
        self.spark = spark
        self.source = source
        self.randomness = randomness
        self.keys = source.keys
        self._cached: list = []

    def pairs(self, cached: bool = False):
        """The input's distinct (user, key) pairs; `cached=True` for mechanisms that read them again."""
        df = self.source.pairs()
        return self.cache(df) if cached else df

    def cache(self, df):
        """Persist `df` for this run (memory, spilling to disk); unpersisted in `close()`."""
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._cached.append(df)
        return df

    def collect(self, df) -> pa.Table:
        """Released keys (internal names) as Arrow, computed once."""
        return df.select(*self.keys).toArrow()

    def frame(self, table: pa.Table):
        """A Spark DataFrame of a collected Arrow table (e.g. the keys released so far)."""
        return self.spark.createDataFrame(table)

    def output(self, table: pa.Table) -> pa.Table:
        """Released keys under the input's column names."""
        return table.select(self.keys).rename_columns(self.source.key_names)

    def close(self) -> None:
        for df in self._cached:
            try:
                df.unpersist()
            except Exception:
                pass
        self._cached.clear()
