"""The engine registry: `engine_for(con)` picks the engine that runs a release from the connection.

An engine kind supplies what the entry points (`select`, `count_release`, `evaluate`) need beyond the
generic stages: `open_run` (resolve input → Session charge → NULL check → the run's engine, closed
however it ends) and how a released Arrow table becomes the engine's relation. The entry points never
branch on the engine; mechanisms declare the engines they run on (`Mechanism.engines`).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import duckdb
import pyarrow as pa

from .errors import InvalidParameter
from .release import by_key
from .spark import is_spark_session
from .stages.base import Engine

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    # what the entry points take as `con`: a DuckDB connection or a SparkSession
    Connection: TypeAlias = duckdb.DuckDBPyConnection | SparkSession


@dataclass(frozen=True)
class EngineKind:
    """One engine: its name, which connections it takes, its run lifecycle and its result relation."""

    name: str
    accepts: Callable[[Any], bool]
    open_run: Callable[..., AbstractContextManager[Engine]]
    # the engine's relation over a released Arrow table, listed by the key columns `key_names`
    relation: Callable[[Any, pa.Table, list[str]], Any]
    # an Arrow table sorted by `columns` in the engine's order
    sort_by: Callable[[Any, pa.Table, list[str]], pa.Table]


def _duckdb_run(*args: Any, **kwargs: Any) -> AbstractContextManager[Engine]:
    from .lifecycle import open_run

    return open_run(*args, **kwargs)


def _spark_run(*args: Any, **kwargs: Any) -> AbstractContextManager[Engine]:
    from .spark.lifecycle import open_run  # pyspark is imported only when a SparkSession is passed

    return open_run(*args, **kwargs)


ENGINES: tuple[EngineKind, ...] = (
    EngineKind("duckdb", lambda con: isinstance(con, duckdb.DuckDBPyConnection), _duckdb_run,
               by_key, lambda con, table, columns: by_key(con, table, columns).to_arrow_table()),
    EngineKind("spark", is_spark_session, _spark_run,
               lambda spark, table, key_names: spark.createDataFrame(table).orderBy(*key_names),
               lambda spark, table, columns: spark.createDataFrame(table).orderBy(*columns).toArrow()),
)


def engine_for(con: object) -> EngineKind:
    """The engine for `con` (a DuckDB connection or a SparkSession), or a clear error."""
    for kind in ENGINES:
        if kind.accepts(con):
            return kind
    raise InvalidParameter(f"con must be a duckdb connection or a SparkSession, got {type(con).__name__}")
