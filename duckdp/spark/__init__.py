"""duckdp on Apache Spark: the same mechanisms, plans and `Release` over Spark DataFrames.

`duckdp.select(spark, df_or_table, algo=...)`, `duckdp.count_release(spark, ...)` and
`duckdp.Session(spark, ...)` run here when their first argument is a `SparkSession`
(`duckdp.engines.engine_for`). Plans (every σ and T) come from the engine-neutral `Mechanism.plan`
and the mechanisms run unchanged (`mech.run(stages, plan, params)`); only the generic data stages
are written again (`stages.py`, a `duckdp.stages.base.Engine`; the run in `lifecycle.py`; per-key
PRF noise in `noise.py`), and each mechanism family's own Spark stages sit in its folder
(duckdp/mechanisms/<family>/spark.py).
pyspark is imported only when a SparkSession is passed.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import DuckDPError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_DEFAULT_PYTHON = "python3"     # what pyspark's SparkContext runs workers with when PYSPARK_PYTHON is unset


def is_spark_session(obj: object) -> bool:
    """True for a `pyspark.sql.SparkSession` (classic or Connect), without importing pyspark."""
    return any(c.__name__ == "SparkSession" and c.__module__.startswith("pyspark.")
               for c in type(obj).__mro__)


def use_driver_python(spark: SparkSession) -> None:
    """On a local master, run Python workers with this interpreter unless the user chose one.

    pyspark starts workers with `PYSPARK_PYTHON`, else `python3` from PATH — often a system Python
    without duckdp (a venv used without activating it), failing with 240 lines of trace. On a local
    master the workers are on this machine, so this interpreter is the right one; on a cluster the
    executors' Python is the cluster's business (see `executor_errors`).
    """
    if os.environ.get("PYSPARK_PYTHON") or not local_master(spark):
        return
    sc = spark.sparkContext
    if sc.pythonExec == _DEFAULT_PYTHON:
        sc.pythonExec = sys.executable


def local_master(spark: SparkSession) -> bool:
    """Whether the session runs on a local master (executors in the driver's JVM, workers on this machine);
    False on Spark Connect, which has no SparkContext (its workers are the server's)."""
    try:
        return str(spark.sparkContext.master).startswith("local")
    except Exception:
        return False


def missing_duckdp(exc: BaseException) -> DuckDPError | None:
    """The one-line error for an executor that cannot import duckdp, or None for other failures."""
    if "No module named 'duckdp'" not in str(exc):
        return None
    return DuckDPError("Spark's Python workers cannot import duckdp: install duckdp where the executors run, or "
                       "set PYSPARK_PYTHON to an interpreter that has it (this driver runs "
                       f"{sys.executable}), or ship it with --py-files")


@contextmanager
def executor_errors() -> Iterator[None]:
    """Turn Spark's long trace for an executor without duckdp into one clear duckdp error."""
    try:
        yield
    except Exception as exc:
        clear = missing_duckdp(exc)
        if clear is None:
            raise
        raise clear from None
