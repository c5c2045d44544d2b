"""Private Count Release's own stage per engine: the k̄ + 1 largest distinct-user counts (`top_counts`;
DuckDB: duckdb.py with ./sql/pcr_top_counts.sql, Spark: spark.py). The mechanism itself, Rogers et
al.'s Alg. 2 in numpy, is duckdp/count_release.py."""
from __future__ import annotations

import importlib
from types import ModuleType

from ...stages.base import Engine


def own_stages(engine: Engine) -> ModuleType:
    """Count release's own stages for `engine` (duckdp.mechanisms.count_release.<engine.name>)."""
    return importlib.import_module(f"{__name__}.{engine.name}")
