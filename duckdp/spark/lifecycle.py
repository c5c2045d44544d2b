"""The Spark run lifecycle behind `duckdp.engines` (the DuckDB one: duckdp/lifecycle.py).

resolve input → `check_source` → Session charge (`on_plan`) → NULL check → the run's `SparkStages`,
executor errors made clear, stored frames unpersisted and the session's broadcast settings restored
however it ends (`no_auto_broadcast`).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..rng import Randomness
from ..source import ItemCol
from . import executor_errors, local_master, use_driver_python
from .source import SparkSource, check_nulls, resolve
from .stages import SparkStages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


# Spark's size thresholds under which it broadcasts a join side on its own (the adaptive one falls back to the
# first when unset); -1 turns automatic broadcasting off, explicit `broadcast` hints still apply.
BROADCAST_CONFS = ("spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.autoBroadcastJoinThreshold")
_scopes: dict[int, tuple[int, dict[str, str | None]]] = {}     # id(session) → (its open runs, saved settings)
_scopes_lock = threading.Lock()


@contextmanager
def no_auto_broadcast(spark: SparkSession) -> Iterator[None]:
    """No automatic broadcast joins while a run is open; the session's own settings back afterwards.

    Why: a multi-round release runs dozens of joins whose sides are small, and Spark broadcasts each one (10 MB
    threshold). On a local master the executors share the driver's JVM and keep every broadcast deserialized, a
    hash relation holding at least one memory page (several MB on a 1 GB driver), until the ContextCleaner frees it
    after a driver GC finds it unreachable: one MAD2R release on 20k rows left 524 MB of such pages on a default
    1 GB driver and a few repeated releases ran it out of heap (benchmarks/RESULTS.md "Spark driver memory across
    releases (stop 32)", where the time cost of sort-merge joins instead is measured). The thresholds are session
    settings, so they are set to -1 while any duckdp run on this session is open (runs in several threads share one
    save) and each is put back exactly as it was, unset if it was unset, when the last run closes. Queries other
    threads run on the same session meanwhile plan without automatic broadcasts too (their results are the same).
    Local masters only: on a cluster the executors hold their broadcasts in their own JVMs, and a sort-merge join
    in place of a broadcast shuffles the large side, a cost not measured there; Spark plans as configured."""
    if not local_master(spark):
        yield
        return
    conf: Any = spark.conf
    with _scopes_lock:
        runs, saved = _scopes.get(id(spark), (0, {}))
        if runs == 0:
            explicit = conf.getAll                  # only the settings made on this session (not the defaults)
            saved = {key: explicit.get(key) for key in BROADCAST_CONFS}
            for key in BROADCAST_CONFS:
                conf.set(key, "-1")
        _scopes[id(spark)] = (runs + 1, saved)
    try:
        yield
    finally:
        with _scopes_lock:
            runs, saved = _scopes.pop(id(spark))
            if runs > 1:
                _scopes[id(spark)] = (runs - 1, saved)
            else:
                for key, value in saved.items():
                    if value is None:
                        conf.unset(key)
                    else:
                        conf.set(key, value)


@contextmanager
def open_run(spark: SparkSession, table: DataFrame | str, user_col: str, item_col: ItemCol,
             randomness: Randomness | None = None, *,
             plan: list | None = None, on_plan: Callable | None = None,
             check_source: Callable[[SparkSource], None] | None = None,
             truncation: str = "per_user", key_param: str = "item_col") -> Iterator[SparkStages]:
    """The stages of one Spark run over `table` (a DataFrame or table name); as duckdp.lifecycle.open_run."""
    use_driver_python(spark)
    source = resolve(spark, table, user_col, item_col, key_param)
    stages = SparkStages(spark, source, randomness or Randomness(None), truncation)
    try:
        if check_source is not None:
            check_source(source)
        if on_plan is not None:
            on_plan(plan, source.description)
        check_nulls(source)
        with executor_errors(), no_auto_broadcast(spark):
            yield stages
    finally:
        stages.close()
