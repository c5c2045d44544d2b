"""One run lifecycle for every entry point: connect check → run id → resolve input → charge → NULL check → close.

`select`, `count_release` and `evaluate` all open their runs here, so each of them resolves input
the same way, charges a session before reading any data, refuses NULLs and always cleans up.
"""
from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import duckdb

from .errors import InvalidParameter
from .rng import Randomness
from .run import RunContext, raise_if_interrupted
from .source import ItemCol, Source, check_nulls, resolve
from .stages.duckdb import DuckDBStages


@contextmanager
def open_run(con: duckdb.DuckDBPyConnection, table: object, user_col: str, item_col: ItemCol,
             randomness: Randomness | None = None, *,
             plan: list | None = None, on_plan: Callable | None = None,
             check_source: Callable[[Source], None] | None = None,
             truncation: str = "per_user", key_param: str = "item_col") -> Iterator[DuckDBStages]:
    """The stages of one run over `table` on `con`, closed (TEMP tables, views) however it ends.

    `check_source(source)` runs first on the resolved input; `on_plan(plan, input)` (Session's
    charge; `plan` the RoundPlans, or budgets) runs before any data is read; then NULL users/keys are
    refused. `truncation` is the order of the run's Δ0 truncations (stages/duckdb.py `truncate`); `key_param` the
    caller's name for `item_col` in errors (aggregate's `by`). A cancelled
    query surfaces as KeyboardInterrupt (run.raise_if_interrupted).
    """
    if not isinstance(con, duckdb.DuckDBPyConnection):
        raise InvalidParameter(f"con must be a duckdb connection, got {type(con).__name__}")
    _refuse_default_collation(con)
    run_id = secrets.token_hex(6)
    source = resolve(con, table, user_col, item_col, run_id, key_param)   # unregisters its view on failure
    ctx = RunContext(con, source, randomness or Randomness(None), run_id)
    try:
        if check_source is not None:
            check_source(source)
        if on_plan is not None:
            on_plan(plan, source.description)
        check_nulls(con, source)
        yield DuckDBStages(ctx, truncation)
    except Exception as exc:
        raise_if_interrupted(exc)
        raise
    finally:
        ctx.close()


def _refuse_default_collation(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse a connection whose `default_collation` is not binary: under it strings that compare equal in several
    forms ('A' and 'a' under NOCASE) would sort in the order rows arrive and group showing the first row's form —
    in listings and key sets duckdp does not read through `source.canonical_key`. A setting, not data: the
    refusal says nothing of the input."""
    (collation,), = con.sql("SELECT current_setting('default_collation')").fetchall()
    if str(collation).strip().lower() not in ("", "binary"):
        raise InvalidParameter(f"this connection's default_collation is {collation!r}: duckdp compares keys byte by "
                               "byte, and a collation would let equal keys of different forms show which row came "
                               "first; RESET default_collation before calling duckdp (a key column's own COLLATE is "
                               "fine: duckdp reads it byte by byte)")
