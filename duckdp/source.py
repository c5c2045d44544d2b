"""Resolve the user's input (table/view name, relation or dataframe) and columns safely.

Names are looked up in the catalog with bound queries and then quoted; relations and dataframes
are registered as run-unique temporary views. Nothing the user wrote is pasted into SQL.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from duckdb.sqltypes import DuckDBPyType

from .errors import DataError, SchemaError
from .templates import quote_ident

_CATALOG = """
SELECT database_name, schema_name, table_name AS name, estimated_size FROM duckdb_tables()
UNION ALL
SELECT database_name, schema_name, view_name, NULL FROM duckdb_views() WHERE NOT internal
"""


# Keys that compare equal in more than one form — floats' −0.0 and 0.0, NaNs, strings under a collation — make one
# group (GROUP BY, DISTINCT and `=` compare them equal) that shows whichever form of the row read first, so the form
# a released key shows would tell which row came first: neighbour pairs in tests/test_order.py.
def canonical_key(column: str, kind: DuckDBPyType) -> str:
    """SQL of key column `column` (quoted) of DuckDB type `kind` in its canonical form: floats with −0.0 as 0.0 and
    every NaN as the one NaN (the same groups, each showing one fixed form), also inside a LIST, fixed-size ARRAY,
    STRUCT, MAP or UNION key; strings compared byte by byte (`COLLATE "binary"`: a column's collation such as NOCASE
    would group 'A' with 'a' and show the first row's); other types as they are."""
    if kind.id == "varchar":
        return f'({column} COLLATE "binary")'
    return _canonical_floats(column, kind, 0)


def _canonical_floats(expr: str, kind: DuckDBPyType, depth: int) -> str:
    """`expr` with every float it holds (itself, a LIST's or ARRAY's elements, a STRUCT's fields, a MAP's keys and
    values, a UNION's members, recursively) canonical, its type unchanged."""
    if not _holds_float(kind):
        return expr
    if kind.id in ("float", "double"):
        t = kind.id.upper()
        return f"(CASE WHEN {expr} = 0 THEN CAST(0 AS {t}) WHEN isnan({expr}) THEN CAST('NaN' AS {t}) ELSE {expr} END)"
    x = f"_dp_x{depth}"
    parts = _parts(kind)
    if kind.id in ("list", "array"):         # list_transform of an ARRAY gives a LIST: cast back to the ARRAY type
        out = f"list_transform({expr}, lambda {x}: {_canonical_floats(x, parts[0][1], depth + 1)})"
        return out if kind.id == "list" else f"CAST({out} AS {kind})"
    if kind.id == "map":                     # −0.0 and 0.0 cannot both be keys of one map (DuckDB: keys unique)
        entry = ", ".join(f"{name} := {_canonical_floats(f'{x}.{name}', sub, depth + 1)}" for name, sub in parts)
        return f"map_from_entries(list_transform(map_entries({expr}), lambda {x}: struct_pack({entry})))"
    if kind.id == "union":                   # the members after the tag (an unnamed UTINYINT child)
        cases = " ".join(
            f"WHEN {_literal(name)} THEN CAST(union_value({quote_ident(name)} := "
            f"{_canonical_floats(f'union_extract({expr}, {_literal(name)})', sub, depth + 1)}) AS {kind})"
            for name, sub in parts[1:])
        return f"(CASE union_tag({expr}) {cases} END)"                 # a NULL union stays NULL
    fields = ", ".join(f"{quote_ident(name)} := {_canonical_floats(f'{expr}.{quote_ident(name)}', sub, depth)}"
                       for name, sub in parts)
    return f"(CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({fields}) END)"      # a NULL struct stays NULL


def _literal(name: str) -> str:
    """A SQL string literal of `name` (a UNION member's name, from the input's schema)."""
    return "'" + name.replace("'", "''") + "'"


def _holds_float(kind: DuckDBPyType) -> bool:
    """Whether a key of type `kind` holds a float that `_canonical_floats` rewrites."""
    if kind.id in ("float", "double"):
        return True
    if kind.id in ("list", "array", "struct", "map", "union"):
        return any(_holds_float(sub) for _, sub in _parts(kind))
    return False


def _parts(kind: DuckDBPyType) -> list[tuple[str, DuckDBPyType]]:
    """A LIST's or ARRAY's element type (named "child"), a STRUCT's fields, a MAP's key and value, a UNION's tag and
    members, in order (an ARRAY's size, an int, left out)."""
    return [(name, sub) for name, sub in kind.children if isinstance(sub, DuckDBPyType)]


def distinct_keys(table: pa.Table) -> pa.Table:
    """The distinct rows of `table` (key columns, e.g. a public key set) as a GROUP BY on them sees keys: each in
    `canonical_key`'s form (−0.0 is 0.0, one NaN, also inside nested keys; strings byte by byte), sorted, with
    `table`'s schema. Run in an in-memory DuckDB of its own: the key set is public and small."""
    with duckdb.connect() as con:
        con.register("_dp_keys", table)
        rel = con.table("_dp_keys")
        cols = ", ".join(f"{canonical_key(quote_ident(name), kind)} AS {quote_ident(name)}"
                         for name, kind in zip(rel.columns, rel.types, strict=True))
        out: pa.Table = con.sql(f"SELECT DISTINCT {cols} FROM _dp_keys ORDER BY ALL").to_arrow_table()
        return out.cast(table.schema)


@dataclass
class Source:
    """A resolved input: a quoted relation reference plus its quoted user and key columns."""

    sql: str                 # quoted reference usable in FROM
    user: str                # quoted user column
    keys: list[str]          # quoted key columns, in order
    key_names: list[str]     # the key columns' names as they appear in the input
    key_types: list[str]     # DuckDB types of the key columns
    schema: list[tuple[str, DuckDBPyType]]   # every input column's name and DuckDB type, in order (read once)
    registered: str | None   # temporary view name to unregister afterwards
    description: str         # for messages and reports
    estimated_rows: int | None = None   # the catalog's row estimate, for tables only


# `item_col`: one key column's name or a list of them (None: the caller's default)
ItemCol = str | list[str] | None


def _catalog_lookup(con: duckdb.DuckDBPyConnection, name: str) -> tuple[str, int | None]:
    """The quoted, qualified reference of table or view `name`, and a table's estimated rows."""
    rows = con.sql(_CATALOG).fetchall()
    current = con.sql("SELECT current_database(), current_schema()").fetchall()[0]

    def pick(matches: list[tuple]) -> tuple:
        if len(matches) == 1:
            return matches[0]
        for preferred in (lambda r: (r[0], r[1]) == tuple(current), lambda r: r[0] == "temp"):
            chosen = [r for r in matches if preferred(r)]
            if len(chosen) == 1:
                return chosen[0]
        raise SchemaError(f"table name {name!r} is ambiguous: " + ", ".join(".".join(r[:3]) for r in matches)
                          + "; pass a qualified name")

    exact = [r for r in rows if r[2] == name] or [r for r in rows if r[2].lower() == name.lower()]
    if exact:
        found = pick(exact)
        return ".".join(quote_ident(p) for p in found[:3]), found[3]
    parts = name.split(".")
    if 2 <= len(parts) <= 3:
        def fits(r: tuple) -> bool:
            tail = r[:3] if len(parts) == 3 else r[1:3]
            alt = (r[0], r[2])
            return [p.lower() for p in tail] == [p.lower() for p in parts] or (
                len(parts) == 2 and [p.lower() for p in alt] == [p.lower() for p in parts])
        qualified = [r for r in rows if fits(r)]
        if qualified:
            found = pick(qualified)
            return ".".join(quote_ident(p) for p in found[:3]), found[3]
    raise SchemaError(f"no table or view named {name!r} in this database")


def _match_column(columns: list[str], wanted: object, role: str, where: str) -> str:
    if not isinstance(wanted, str) or not wanted:
        raise SchemaError(f"{role} must be a column name (a non-empty string), got {wanted!r}")
    if wanted in columns:
        return wanted
    folded = [c for c in columns if c.lower() == wanted.lower()]
    if len(folded) == 1:
        return folded[0]
    raise SchemaError(f"{role} {wanted!r} is not a column of {where}; columns are: {', '.join(columns)}")


def match_columns(columns: list[str], user_col: str, item_col: ItemCol, where: str,
                  key_param: str = "item_col") -> tuple[str, list[str]]:
    """The input's user column and key columns named by `user_col` / `item_col` (one name or a list),
    distinct from each other; a SchemaError naming the input otherwise (shared with Spark). `key_param`: the
    caller's name for the key columns' parameter, as errors call it (aggregate's `by`)."""
    user = _match_column(columns, user_col, "user_col", where)
    wanted = [item_col] if isinstance(item_col, str) else list(item_col or [])
    if not wanted:
        raise SchemaError(f"{key_param} must name at least one column")
    keys = [_match_column(columns, c, key_param, where) for c in wanted]
    if user in keys or len(set(keys)) != len(keys):
        raise SchemaError(f"user_col and {key_param} must be distinct columns")
    return user, keys


def resolve(con: duckdb.DuckDBPyConnection, table: object, user_col: str, item_col: ItemCol, run_id: str,
            key_param: str = "item_col") -> Source:
    """Resolve `table` and its columns on `con`; register relations/dataframes as temp views."""
    registered, estimated_rows = None, None
    if isinstance(table, str):
        ref, estimated_rows = _catalog_lookup(con, table)
        description = table
    elif table is None or isinstance(table, duckdb.DuckDBPyConnection):
        raise SchemaError(f"table must be a table or view name, a DuckDB relation, or a DataFrame/Arrow table; "
                          f"got {'None' if table is None else 'a connection'}")
    else:
        check_homogeneous(table, user_col, item_col)
        registered = f"_duckdp_{run_id}_input"
        try:
            con.register(registered, table)
        except Exception as exc:
            raise SchemaError(f"cannot read the given {type(table).__name__} on this connection: {exc}") from None
        ref = quote_ident(registered)
        description = f"<{type(table).__name__}>"
    try:
        try:
            head = con.sql(f"SELECT * FROM {ref} LIMIT 0")
        except duckdb.Error as exc:
            raise SchemaError(_unreadable(con, table, description, exc)) from None
        columns, types = list(head.columns), [str(t) for t in head.types]
        user, keys = match_columns(columns, user_col, item_col, description, key_param)
    except Exception:
        if registered:
            con.unregister(registered)
        raise
    return Source(ref, quote_ident(user), [quote_ident(k) for k in keys], keys,
                  [types[columns.index(k)] for k in keys], list(zip(columns, head.types, strict=True)), registered,
                  description, estimated_rows)


def _unreadable(con: duckdb.DuckDBPyConnection, table: object, description: str, exc: duckdb.Error) -> str:
    """Why an input's columns cannot even be bound: a view over a deleted file or a renamed table."""
    reason = str(exc).splitlines()[0]
    if isinstance(table, str):
        views = con.sql("SELECT sql FROM duckdb_views() WHERE NOT internal AND view_name = $name",
                        params={"name": table.split(".")[-1]}).fetchall()
        if len(views) == 1:
            return (f"view {table!r} cannot be read: something its definition names is missing ({reason}); "
                    f"its definition: {' '.join(views[0][0].split())}")
    return f"{description} cannot be read ({reason})"


def _kind(value: object) -> str:
    """A value's kind as DuckDB would read it (numpy and Python integers alike)."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    return type(value).__name__


def check_homogeneous(frame: Any, user_col: str, item_col: ItemCol) -> None:
    """Refuse pandas object columns (the user column or a key column) that mix Python types: DuckDB
    reads [1, '1', 1.0] as the strings '1' and '1.0', merging two users or keys into one, and fails
    on others with a raw cast error."""
    if not type(frame).__module__.startswith("pandas") or not hasattr(frame, "dtypes"):
        return
    from pandas.api.types import infer_dtype

    wanted = {str(c).lower() for c in [user_col, *([item_col] if isinstance(item_col, str) else item_col or [])]}
    for name in frame.columns:
        column = frame[name]
        if (str(name).lower() not in wanted or column.dtype != object
                or not infer_dtype(column, skipna=True).startswith("mixed")):
            continue
        kinds = sorted({_kind(v) for v in column.dropna()})     # "mixed" also means lists, tuples, …
        if len(kinds) > 1:
            raise DataError(f"column {name!r} mixes Python types ({', '.join(kinds)}); convert it to one type "
                            "first (e.g. df[col].astype(str)) so that equal-looking values are neither merged "
                            "nor refused")


def check_nulls(con: duckdb.DuckDBPyConnection, source: Source) -> None:
    """Refuse NULL user ids or keys, saying how many rows have them (never drop them silently).

    DuckDB's column statistics (`stats()`, conservative: has_null is False only when no NULL can
    exist) skip the counting scan for tables known to be NULL-free.
    """
    columns = [source.user, *source.keys]
    stats = con.sql(f"SELECT {', '.join(f'stats({c})' for c in columns)} FROM {source.sql} LIMIT 1").fetchall()
    if stats and all(isinstance(s, dict) and s.get("has_null") is False for s in stats[0]):
        return
    any_key_null = " OR ".join(f"{k} IS NULL" for k in source.keys)
    n_user, n_key = con.sql(
        f"SELECT count(*) FILTER (WHERE {source.user} IS NULL), count(*) FILTER (WHERE {any_key_null}) "
        f"FROM {source.sql}").fetchall()[0]
    problems = []
    if n_user:
        problems.append(f"{n_user} row(s) with a NULL user id")
    if n_key:
        problems.append(f"{n_key} row(s) with a NULL item")
    if problems:
        raise DataError(f"{source.description}: " + " and ".join(problems)
                        + "; filter or fill them first (duckdp never drops rows silently)")
