"""Private GROUP BY's engine stages (docs/specs/private-group-by.md §2): restrict rows to a key set, bound
each user to Δ0 keys (the shared truncation template), sample ≤ m rows per (user, key), clip and discretise
values, per-key measures. DuckDB only for now (`ENGINES`); the noise and the plan are engine-free
(duckdp/privacy/aggregate.py, duckdp/group_by.py)."""
from __future__ import annotations

ENGINES = ("duckdb",)
ENGINE_NOTE = "aggregate runs on DuckDB only for now"
