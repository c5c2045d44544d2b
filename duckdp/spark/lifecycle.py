"""The Spark run lifecycle behind `duckdp.engines` (the DuckDB one: duckdp/lifecycle.py).

resolve input → `check_source` → Session charge (`on_plan`) → NULL check → the run's `SparkStages`,
executor errors made clear and stored frames unpersisted however it ends.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..rng import Randomness
from ..source import ItemCol
from . import executor_errors, use_driver_python
from .source import SparkSource, check_nulls, resolve
from .stages import SparkStages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@contextmanager
def open_run(spark: SparkSession, table: DataFrame | str, user_col: str, item_col: ItemCol,
             randomness: Randomness | None = None, *,
             plan: list | None = None, on_plan: Callable | None = None,
             check_source: Callable[[SparkSource], None] | None = None,
             truncation: str = "per_user") -> Iterator[SparkStages]:
    """The stages of one Spark run over `table` (a DataFrame or table name); as duckdp.lifecycle.open_run."""
    use_driver_python(spark)
    source = resolve(spark, table, user_col, item_col)
    stages = SparkStages(spark, source, randomness or Randomness(None), truncation)
    try:
        if check_source is not None:
            check_source(source)
        if on_plan is not None:
            on_plan(plan, source.description)
        check_nulls(source)
        with executor_errors():
            yield stages
    finally:
        stages.close()
