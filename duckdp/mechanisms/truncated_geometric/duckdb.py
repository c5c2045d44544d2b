"""The truncated geometric mechanism's own stage on DuckDB (template in ./sql)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...stages import Query
from ...stages.duckdb import DuckDBStages, merge


class _UniformDraw(NamedTuple):
    """A noise-stage plan keeping a key iff weight − u ≥ 0 for one fresh uniform u."""

    noise: str = "uniform"
    scale: float = -1.0
    threshold: float = 0.0


def geometric_release(engine: DuckDBStages, weights: Query, keep_prob: np.ndarray) -> Query:
    """π(n) as each key's weight [truncated_geometric.sql] through the generic release stage with noise
    −u and threshold 0: kept iff a fresh uniform u ≤ π(n) (Desfontaines et al. 2022 Thm 1)."""
    keep = engine.query("truncated_geometric", {"weighted": weights.sql, "keys": engine.ctx.key_aliases},
                        merge(weights.params, {"keep_prob": keep_prob.tolist()}))
    return engine.release(keep, _UniformDraw())
