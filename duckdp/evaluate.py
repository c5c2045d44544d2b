"""Utility of a release measured on the true data — NOT private: for benchmarks and data you may inspect.

`evaluate` reads the exact per-key user counts of the input, so its output reveals the data as
much as the data itself does. Use it to compare mechanisms and budgets on public or synthetic
data, never to publish statistics about private data. It reports the released count, the
captured mass (share of all distinct (user, key) entries whose key was released, as in Chen et
al. ICML 2025 and Dick et al. ICLR 2026) and the release rate by key frequency.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from .engines import engine_for
from .errors import InvalidParameter, SchemaError
from .stages.duckdb import DuckDBStages

if TYPE_CHECKING:
    from .engines import Connection
    from .release import Release

EVALUATE_ENGINES = ("duckdb",)     # the engines `frequency_buckets` is written for

# Key-frequency buckets in distinct users: (label, lowest, highest or None).
BUCKETS = (("1", 1, 1), ("2–4", 2, 4), ("5–9", 5, 9), ("10–49", 10, 49), ("50–99", 50, 99),
           ("100–999", 100, 999), ("≥1000", 1000, None))


@dataclass
class Evaluation:
    """Released count, coverage of the true keys and entries, and the release rate by key frequency."""

    released: int                # rows of the release
    released_in_table: int       # released keys that occur in the evaluated table
    items: int                   # distinct keys in the table
    pairs: int                   # distinct (user, key) entries in the table
    captured_pairs: int          # entries whose key was released
    by_frequency: pa.Table       # bucket, min_users, max_users, items, released, release_rate, pairs, captured_pairs

    @property
    def captured_mass(self) -> float:
        return self.captured_pairs / self.pairs if self.pairs else 0.0

    def as_dict(self) -> dict:
        return {"released": self.released, "released_in_table": self.released_in_table, "items": self.items,
                "pairs": self.pairs, "captured_pairs": self.captured_pairs, "captured_mass": self.captured_mass}

    def __str__(self) -> str:
        lines = [f"released {self.released:,} keys ({self.released_in_table:,} occur in the table) of {self.items:,}; "
                 f"captured mass {self.captured_mass:.2%} of {self.pairs:,} (user, key) entries  [non-private]",
                 f"  {'users/key':>9} {'keys':>10} {'released':>10} {'rate':>8}"]
        for row in self.by_frequency.to_pylist():
            rate = "–" if row["release_rate"] is None else f"{row['release_rate']:.2%}"
            lines.append(f"  {row['bucket']:>9} {row['items']:>10,} {row['released']:>10,} {rate:>8}")
        return "\n".join(lines)


def _bucket_case(column: str) -> str:
    """CASE expression giving each key's bucket index (constants only)."""
    whens = " ".join(f"WHEN {column} <= {hi} THEN {i}" for i, (_, _, hi) in enumerate(BUCKETS) if hi is not None)
    return f"CASE {whens} ELSE {len(BUCKETS) - 1} END"


def frequency_buckets(engine: DuckDBStages, released: pa.Table, bucket_case: str) -> list[tuple]:
    """Per bucket of `bucket_case` (over `_dp_users`): keys, released keys, entries, captured entries
    (sql/evaluate_buckets.sql, on DuckDB)."""
    ctx = engine.ctx
    view = ctx.register("released", released.rename_columns(ctx.key_aliases.split(", ")))
    base = ctx.base_idents()
    return ctx.fetch("evaluate_buckets", {
        "source": base["source"], "user": base["user"], "key_select": base["key_select"], "keys": base["keys"],
        "released": view, "match": ctx.key_match("f", "r"), "bucket": bucket_case}, {})


def evaluate(con: Connection, table: object, release: Release, *, user_col: str = "user_id",
             item_col: str | list[str] | None = None) -> Evaluation:
    """Compare `release` with the true keys of `table` (non-private; see the module docstring).

    `item_col` defaults to the release's key columns; given explicitly, it is matched to them by position.
    """
    kind = engine_for(con)
    if kind.name not in EVALUATE_ENGINES:
        raise InvalidParameter(f"evaluate runs on {', '.join(EVALUATE_ENGINES)} only, not on {kind.name}")
    released = release.to_arrow()
    key_names = list(release.key_names)
    wanted = key_names if item_col is None else ([item_col] if isinstance(item_col, str) else list(item_col))
    if len(wanted) != len(key_names):
        raise InvalidParameter(f"item_col {wanted!r} must have as many columns as the release's keys {key_names!r}")
    with kind.open_run(con, table, user_col, wanted) as stages:
        assert isinstance(stages, DuckDBStages)          # EVALUATE_ENGINES
        missing = [k for k in key_names if k not in released.column_names]
        if missing:
            raise SchemaError(f"the release has no key column(s) {missing}")
        counts = {row[0]: [int(v) for v in row[1:]]
                  for row in frequency_buckets(stages, released.select(key_names), _bucket_case("_dp_users"))}
    rows = [counts.get(i, [0, 0, 0, 0]) for i in range(len(BUCKETS))]
    by_frequency = pa.table({
        "bucket": pa.array([b[0] for b in BUCKETS], pa.string()),
        "min_users": pa.array([b[1] for b in BUCKETS], pa.int64()),
        "max_users": pa.array([b[2] for b in BUCKETS], pa.int64()),
        "items": pa.array([r[0] for r in rows], pa.int64()),
        "released": pa.array([r[1] for r in rows], pa.int64()),
        "release_rate": pa.array([r[1] / r[0] if r[0] else None for r in rows], pa.float64()),
        "pairs": pa.array([r[2] for r in rows], pa.int64()),
        "captured_pairs": pa.array([r[3] for r in rows], pa.int64()),
    })
    return Evaluation(released.num_rows, sum(r[1] for r in rows), sum(r[0] for r in rows), sum(r[2] for r in rows),
                      sum(r[3] for r in rows), by_frequency)
