"""The `duckdp` command line: select, count-release, explain, demo, algorithms, macros.

`select` and `count-release` are one-shot releases unless `--ledger FILE` names a DuckDB database
holding a Session ledger (duckdp/session.py): the run is then charged to that ledger's total budget
(`--total-epsilon`/`--total-rho`, `--total-delta`), refused before reading data if it would not fit,
and the ledger (guarded like every persisted ledger) survives across commands.

Exit codes: 0 success; 2 bad usage or bad input (one clear line on stderr, no traceback);
1 internal error. Progress messages go to stderr only when it is a terminal, so piped or
scheduled runs print nothing but their result.
"""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from . import __version__, datasets
from .api import algorithms, select
from .count_release import count_release
from .errors import DuckDPError, InvalidParameter, SchemaError
from .explain import explain
from .explain_aggregate import DEFAULT_COUNTS, explain_aggregate
from .group_by import DEFAULT_TRUNCATION, Aggregate, aggregate
from .macros import macro_sql, write_macro_file
from .mechanisms import get
from .privacy.budget import Budget, EpsDelta, make_budget
from .privacy.composition import zcdp_as_dp
from .release import Release
from .session import Session
from .validation import TRUNCATIONS
from .validation import max_contributions as check_max_contributions

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
_PARQUET = (".parquet", ".pq")
_CSV = (".csv", ".tsv", ".txt", ".csv.gz", ".tsv.gz")
_JSON = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz")
_DATABASE = (".duckdb", ".db", ".ddb")


class _Progress:
    """Short status lines on stderr, only when stderr is a terminal (quiet when piped)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"duckdp: {message}", file=sys.stderr, flush=True)


def _progress(args: argparse.Namespace) -> _Progress:
    return _Progress(sys.stderr.isatty() and not getattr(args, "json", False))


# --- input and output ------------------------------------------------------------------------

def _kind(path: str) -> str:
    """'parquet', 'csv', 'json' or 'database', from the extension or else the file's magic bytes."""
    lower = path.lower()
    for kind, exts in (("parquet", _PARQUET), ("csv", _CSV), ("json", _JSON), ("database", _DATABASE)):
        if lower.endswith(exts):
            return kind
    try:
        head = Path(path).read_bytes()[:16] if Path(path).is_file() else b""
    except OSError:
        head = b""
    if head[:4] == b"PAR1":
        return "parquet"
    if head[8:12] == b"DUCK":
        return "database"
    return "csv"


def _has_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def _input_kind(path: str) -> str:
    """The kind of INPUT; a glob without a known extension is sniffed from its first match."""
    if _has_glob(path):
        matches = sorted(glob.glob(path))
        known = path.lower().endswith(_PARQUET + _CSV + _JSON + _DATABASE)
        return _kind(matches[0]) if matches and not known else _kind(path)
    return _kind(path)


def _quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """DuckDB draws a progress bar on stdout for queries over 2 s by default: off, so piped output
    (e.g. --json) stays parseable on a slow machine; _select turns it on for a terminal."""
    con.execute("SET enable_progress_bar = false")
    return con


def _open_input(path: str, table: str | None) -> tuple[duckdb.DuckDBPyConnection, str]:
    """(connection, table or view name) for INPUT. Database files are opened read-only; files and
    globs become a temporary view named like INPUT on a fresh in-memory connection."""
    kind = _input_kind(path)
    if not _has_glob(path) and not Path(path).exists():
        raise SchemaError(f"input {path!r} does not exist")
    if kind == "database":
        if _has_glob(path):
            raise SchemaError("a DuckDB database input must be a single file, not a glob")
        try:
            con = _quiet(duckdb.connect(path, read_only=True))
        except duckdb.Error as exc:
            raise SchemaError(f"cannot open DuckDB database {path!r}: {_first_line(exc)}") from None
        if table is None:
            names = [r[0] for r in con.sql("SELECT table_name FROM duckdb_tables() UNION ALL "
                                           "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
            if len(names) != 1:
                con.close()
                raise SchemaError(f"{path} holds {len(names)} tables/views; choose one with --table "
                                  f"({', '.join(sorted(names)) or 'none'})")
            table = names[0]
        return con, table
    if table is not None:
        raise SchemaError("--table only applies to a DuckDB database input")
    con = _quiet(duckdb.connect())
    try:
        readers: dict[str, Callable[[str], duckdb.DuckDBPyRelation]] = {
            "parquet": con.read_parquet, "csv": con.read_csv, "json": con.read_json}
        reader = readers[kind]
        relation = reader(path)
        relation.limit(0).fetchall()  # surface unreadable input now, as bad input
        relation.to_view(path)  # a temp view named like INPUT, so messages and the report name it
    except duckdb.Error as exc:
        con.close()
        raise SchemaError(f"cannot read {path!r} as {kind}: {_first_line(exc)}") from None
    return con, path


def _check_output(out: str, inputs: str) -> None:
    """Refuse an output that would overwrite the input or that cannot be written, before any run."""
    target = Path(out)
    if not out.lower().endswith(_PARQUET + (".csv",)):
        raise InvalidParameter(f"output {out!r} must end in .parquet or .csv")
    if not target.parent.resolve().is_dir():
        raise InvalidParameter(f"output directory {str(target.parent)!r} does not exist")
    sources = glob.glob(inputs) if _has_glob(inputs) else [inputs]
    if any(Path(src).exists() and Path(src).resolve() == target.resolve() for src in sources):
        raise InvalidParameter("output must not overwrite the input")


def _write(release: Release, out: str) -> None:
    """Write the keys as `to_arrow()` lists them (sorted by key by the engine: a function of the released
    set only), through a temporary file renamed into place, so a failed run never leaves a partial output."""
    table = release.to_arrow()
    partial = Path(out).with_name(f".{Path(out).name}.partial")
    try:
        if out.lower().endswith(".csv"):
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, partial)
        else:
            import pyarrow.parquet as pq

            pq.write_table(table, partial)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# --- commands --------------------------------------------------------------------------------

def _parse_param(text: str) -> tuple[str, object]:
    """`name=value` with value read as int, float, true/false/none, or else a string."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise InvalidParameter(f"--param expects name=value, got {text!r}")
    lowered = raw.strip().lower()
    if lowered in ("true", "false"):
        return name.strip(), lowered == "true"
    if lowered in ("none", "null"):
        return name.strip(), None
    for cast in (int, float):
        try:
            return name.strip(), cast(raw)
        except ValueError:
            pass
    return name.strip(), raw


def _jsonable(value: Any) -> Any:
    """JSON for budgets (as_dict), numpy scalars (item) and anything else (str)."""
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _release_json(release: Release, output: str) -> dict:
    return {"algo": release.algo, "citation": release.citation, "input": release.input,
            "key_columns": release.key_names, "output": output, "released": len(release),
            "max_contributions": release.max_contributions, "params": release.params,
            "truncation": release.truncation if release.max_contributions is not None else None,
            "budget": release.budget.as_dict(), "spent": release.spent.as_dict(), "seeded": release.seeded,
            "rounds": [{"index": r.index, "budget": r.budget.as_dict(), "noise": r.noise, "sigma": r.sigma,
                        "threshold": r.threshold, "released": r.released, **r.extra_fields()} for r in release.rounds]}


def _contributions(text: str) -> int | str:
    """--max-contributions: an integer Δ0, or 'auto' (a private choice, duckdp/privacy/auto_contributions.py)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'auto', got {text!r}") from None


_LEDGER_ALIAS = "duckdp_ledger_db"


def _check_ledger_args(args: argparse.Namespace) -> None:
    """--ledger needs the ledger's total budget; the total flags need --ledger (checked before any run)."""
    totals = args.total_epsilon is not None or args.total_rho is not None or args.total_delta is not None
    if args.ledger is None:
        if totals:
            raise InvalidParameter("--total-epsilon/--total-rho/--total-delta set a ledger's budget: add --ledger FILE")
        return
    if (args.total_epsilon is None) == (args.total_rho is None) or args.total_delta is None:
        raise InvalidParameter("--ledger needs the ledger's total budget: --total-epsilon E or --total-rho R, "
                               "and --total-delta D (the same every time the ledger is used)")
    if Path(args.ledger).resolve() == Path(args.input).resolve():
        raise InvalidParameter("--ledger must not be the input file")
    make_budget(epsilon=args.total_epsilon, rho=args.total_rho, delta=args.total_delta)


def _session(con: duckdb.DuckDBPyConnection, args: argparse.Namespace) -> Session | None:
    """The Session of --ledger FILE: the database attached read-write to the run's connection, its
    ledger in table --ledger-table (created on first use; guarded, duckdp/ledger_guard.py)."""
    if args.ledger is None:
        return None
    try:
        con.execute(f"ATTACH $path AS {_LEDGER_ALIAS} (READ_WRITE)", {"path": str(args.ledger)})
    except duckdb.Error as exc:
        raise InvalidParameter(f"cannot open ledger database {args.ledger!r}: {_first_line(exc)}") from None
    return Session(con, epsilon=args.total_epsilon, rho=args.total_rho, delta=args.total_delta,
                   ledger_table=(_LEDGER_ALIAS, "main", args.ledger_table))


def _item_col(args: argparse.Namespace) -> str | list[str]:
    return args.item_col[0] if len(args.item_col) == 1 else list(args.item_col)


# run(con, table, session) -> the release: select, count release or aggregate, alone or through the ledger's Session
_Run = Callable[[duckdb.DuckDBPyConnection, str, Session | None], Any]


def _run_release(args: argparse.Namespace, run: _Run,
                 to_json: Callable[[Any, str], dict[str, Any]] | None = None) -> int:
    """Shared by select and count-release: checks → open input → `run(con, table, session)` → write →
    report (and the ledger's remaining budget)."""
    progress = _progress(args)
    _check_output(args.output, args.input)
    _check_ledger_args(args)
    progress(f"reading {args.input}")
    con, table = _open_input(args.input, args.table)
    try:
        if sys.stdout.isatty() and sys.stderr.isatty() and not args.json:
            con.execute("SET enable_progress_bar = true")
        session = _session(con, args)
        release = run(con, table, session)
        if table != args.input:  # a table inside a database file
            release = dataclasses.replace(release, input=f"{args.input} :: {table}")
        progress(f"writing {args.output}")
        _write(release, args.output)
        remaining = None if session is None else session.remaining
    finally:
        con.close()
    if args.json:
        out = (to_json or _release_json)(release, args.output)
        if remaining is not None:
            out["ledger"] = {"file": args.ledger, "table": args.ledger_table, "remaining": remaining.as_dict()}
        print(json.dumps(out, default=_jsonable, indent=2))
    else:
        print(release.report())
        print(f"  wrote {len(release):,} keys to {args.output}")
        if remaining is not None:
            print(f"  ledger {args.ledger} ({args.ledger_table}): remaining {remaining}")
    return EXIT_OK


def _truncation_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--truncation", choices=TRUNCATIONS, default=default,
                        help=f"order in which a user over Δ0 keeps keys: per_user (uniform per user) or global "
                             f"(one secret key order for every user) ({default})")


def _select(args: argparse.Namespace) -> int:
    params: dict[str, Any] = dict(_parse_param(p) for p in args.param)
    get(args.algo)  # unknown algorithm: fail before touching the input
    progress = _progress(args)

    def run(con: duckdb.DuckDBPyConnection, table: str, session: Session | None) -> Release:
        progress(f"running {args.algo}")
        call = select if session is None else (lambda c, *a, **kw: session.select(*a, **kw))
        return call(con, table, algo=args.algo, epsilon=args.epsilon, rho=args.rho, delta=args.delta,
                    max_contributions=args.max_contributions, user_col=args.user_col, item_col=_item_col(args),
                    seed=args.seed, truncation=args.truncation, **params)

    return _run_release(args, run)


def _count_release(args: argparse.Namespace) -> int:
    params: dict[str, Any] = dict(_parse_param(p) for p in args.param)
    progress = _progress(args)

    def run(con: duckdb.DuckDBPyConnection, table: str, session: Session | None) -> Release:
        progress("running count release")
        call = count_release if session is None else (lambda c, *a, **kw: session.count_release(*a, **kw))
        return call(con, table, rho=args.rho, delta=args.delta, user_col=args.user_col, item_col=_item_col(args),
                    seed=args.seed, **params)

    return _run_release(args, run)


def _metric(text: str) -> tuple[str, Any]:
    """--metric NAME=users | NAME=count | NAME=KIND:COLUMN:LOWER:UPPER, KIND sum, mean, variance or stddev."""
    name, eq, spec = text.partition("=")
    parts = spec.split(":")
    if not eq or not name:
        raise InvalidParameter(f"--metric expects NAME=KIND[:COLUMN:LOWER:UPPER], got {text!r}")
    if len(parts) == 1:
        return name, parts[0]
    if len(parts) != 4:
        raise InvalidParameter(f"--metric {text!r}: sum, mean, variance and stddev take KIND:COLUMN:LOWER:UPPER")
    try:
        return name, (parts[0], parts[1], float(parts[2]), float(parts[3]))
    except ValueError:
        raise InvalidParameter(f"--metric {text!r}: LOWER and UPPER must be numbers") from None


def _public_keys(value: str) -> str | pa.Table:
    """--keys: an existing parquet/CSV file holds public keys (read here: they are public); else ALGO|threshold."""
    if not Path(value).is_file():
        return value
    con = duckdb.connect()
    try:
        reader = "read_csv_auto" if value.lower().endswith(".csv") else "read_parquet"
        return con.sql(f"SELECT * FROM {reader}($path)", params={"path": value}).to_arrow_table()
    except duckdb.Error as exc:
        raise InvalidParameter(f"cannot read public keys from {value!r}: {_first_line(exc)}") from None
    finally:
        con.close()


def _aggregate_json(agg: Aggregate, output: str) -> dict[str, Any]:
    return {"input": agg.input, "key_columns": agg.key_names, "output": output, "released": len(agg),
            "keys": agg.plan.keys, "algo": agg.plan.algo, "spent": agg.spent.as_dict(), "seeded": agg.seeded,
            "max_contributions": agg.plan.max_contributions, "truncation": agg.truncation,
            "auto_contributions": None if agg.plan.auto is None else agg.plan.auto.as_dict(),
            "plan": agg.plan.report_lines()}


def _aggregate(args: argparse.Namespace) -> int:
    params: dict[str, Any] = dict(_parse_param(p) for p in args.param)
    metrics = dict(_metric(m) for m in args.metric)
    keys = _public_keys(args.keys)
    progress = _progress(args)

    def run(con: duckdb.DuckDBPyConnection, table: str, session: Session | None) -> Aggregate:
        progress("running aggregate")
        call = aggregate if session is None else (lambda c, *a, **kw: session.aggregate(*a, **kw))
        return call(con, table, by=args.by[0] if len(args.by) == 1 else list(args.by), user_col=args.user_col,
                    metrics=metrics, keys=keys, epsilon=args.epsilon, rho=args.rho, delta=args.delta,
                    max_contributions=args.max_contributions, max_rows_per_key=args.max_rows_per_key,
                    selection_share=args.selection_share, pre_threshold=args.pre_threshold,
                    confidence=args.confidence, not_null=args.not_null or None, seed=args.seed,
                    truncation=args.truncation, **params)

    return _run_release(args, run, _aggregate_json)


def _explain_aggregate(args: argparse.Namespace) -> int:
    params: dict[str, Any] = dict(_parse_param(p) for p in args.param)
    ex = explain_aggregate(dict(_metric(m) for m in args.metric), keys=args.keys, epsilon=args.epsilon,
                           rho=args.rho, delta=args.delta, max_contributions=args.max_contributions,
                           max_rows_per_key=args.max_rows_per_key, selection_share=args.selection_share,
                           pre_threshold=args.pre_threshold, confidence=args.confidence,
                           not_null=args.not_null or None, truncation=args.truncation, counts=args.counts, **params)
    if args.json:
        print(json.dumps({"plan": ex.plan.report_lines(), "spent": ex.plan.spent.as_dict(),
                          "threshold_users": None if ex.threshold_users is None
                          else {"users_50": ex.threshold_users.users_50, "users_95": ex.threshold_users.users_95},
                          "selection_users": None if ex.selection is None else ex.selection.to_arrow().to_pylist(),
                          "metrics": ex.to_arrow().to_pylist(), "notes": ex.notes}, default=_jsonable, indent=2))
    else:
        print(ex)
    return EXIT_OK


def _explain(args: argparse.Namespace) -> int:
    params: dict[str, Any] = dict(_parse_param(p) for p in args.param)
    ex = explain(args.algo, epsilon=args.epsilon, rho=args.rho, delta=args.delta,
                 max_contributions=args.max_contributions, keys_per_user=args.keys_per_user,
                 truncation=args.truncation, **params)
    if args.json:
        print(json.dumps({"algo": ex.algo, "citation": ex.citation, "budget": ex.budget.as_dict(),
                          "max_contributions": ex.max_contributions, "truncation": ex.truncation,
                          "params": ex.params, "users_needed": ex.to_arrow().to_pylist(), "notes": ex.notes},
                         default=_jsonable, indent=2))
    else:
        print(ex)
    return EXIT_OK


def _demo_budget(mech: dict, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The demo budget for `mech`, and a note when an (ε, δ)-only mechanism gets the (ε, δ) that
    the ρ budget implies (DP-SIPS Cor. 9 with δ' = δ, as Release.spent reports it)."""
    if args.epsilon is not None or "rho/delta" in mech["budgets"]:
        return ({"epsilon": args.epsilon} if args.epsilon is not None else {"rho": args.rho}), ""
    epsilon, delta_dp = zcdp_as_dp(args.rho, args.delta)
    return {"epsilon": epsilon, "delta": delta_dp}, "*"


def _budget_label(budget: Budget) -> str:
    return (f"ε={budget.epsilon:.3g}, δ={budget.delta:.2g}" if isinstance(budget, EpsDelta)
            else f"ρ={budget.rho:.3g}, δ={budget.delta:.2g}")


def _demo(args: argparse.Namespace) -> int:
    progress = _progress(args)
    wanted = args.algos or [m["name"] for m in algorithms()]
    mechs = {m["name"]: m for m in algorithms()}
    for name in wanted:
        get(name)
    # The request itself must be valid before any mechanism runs: a bad ε, δ or Δ0 is an error (exit 2),
    # not one "skipped" line per mechanism.
    make_budget(epsilon=args.epsilon, delta=args.delta, rho=None if args.epsilon is not None else args.rho)
    check_max_contributions(args.max_contributions)
    con = duckdb.connect()
    try:
        progress("building the demo data")
        table = datasets.demo_table(con)
        n, users, items = con.sql(f"SELECT count(*), count(DISTINCT user_id), count(DISTINCT item) "
                                  f"FROM {table}").fetchall()[0]
        print(f"demo data: {n:,} (user, word) rows, {users:,} users, {items:,} distinct words "
              f"(synthetic, DP-SIPS recipe); Δ0 = {args.max_contributions}\n")
        rows, skipped, converted = [], [], False
        for name in wanted:
            mech = mechs[get(name).name]
            if mech.get("unproven"):
                skipped.append(f"{mech['name']}: not proven private (see `duckdp algorithms`)")
                continue
            budget, mark = _demo_budget(mech, args)
            progress(f"running {mech['name']}")
            start = time.perf_counter()
            try:
                release = select(con, table, algo=mech["name"], delta=budget.pop("delta", args.delta),
                                 max_contributions=args.max_contributions, seed=args.seed, **budget)
            except DuckDPError as exc:  # e.g. a mechanism whose defaults do not fit this budget
                skipped.append(f"{mech['name']}: {exc}")
                continue
            converted |= bool(mark)
            rows.append((mech["name"], _budget_label(release.budget) + mark, len(release.rounds), len(release),
                         time.perf_counter() - start))
            if args.verbose:
                print(release.report() + "\n")
        group_by = _demo_group_by(con, table, args) if args.algos is None else []
    finally:
        con.close()
    width = max([len("mechanism")] + [len(r[0]) for r in rows])
    print(f"{'mechanism':<{width}}  {'budget':<22} {'rounds':>6} {'released':>9} {'seconds':>8}")
    for name, label, n_rounds, released, seconds in sorted(rows, key=lambda r: -r[3]):
        print(f"{name:<{width}}  {label:<22} {n_rounds:>6} {released:>9,} {seconds:>8.2f}")
    for line in skipped:
        print(f"skipped {line}")
    if not rows:
        raise InvalidParameter("no mechanism could run with these parameters (see the skipped lines above)")
    if converted:
        print(f"\n* (ε, δ)-only mechanism, run at the (ε, δ)-DP that ρ={args.rho:g}, δ={args.delta:g} zCDP implies "
              "(DP-SIPS Cor. 9), so every row has the same guarantee.")
    for line in group_by:
        print(line)
    print("\nSEEDED runs are reproducible demos, not private releases." if args.seed is not None
          else "\nEvery run draws fresh secure noise; pass --seed for reproducible numbers.")
    return EXIT_OK


def _demo_group_by(con: duckdb.DuckDBPyConnection, table: str, args: argparse.Namespace) -> list[str]:
    """The demo's private GROUP BY: words selected by adaptive_sips with a noisy user count each, at the same budget;
    the five most used beside their true counts (the demo data's own, for comparison: not released)."""
    budget = {"epsilon": args.epsilon} if args.epsilon is not None else {"rho": args.rho}
    agg = aggregate(con, table, by="item", metrics={"users": "users"}, keys="adaptive_sips", delta=args.delta,
                    max_contributions=args.max_contributions, confidence=0.95, seed=args.seed, **budget)
    got = agg.to_arrow().sort_by([("users", "descending"), ("item", "ascending")]).slice(0, 5).to_pylist()
    truth = dict(con.execute(f"SELECT item, count(DISTINCT user_id) FROM {table} GROUP BY item").fetchall())
    lines = [f"\nprivate GROUP BY at the same budget (duckdp.aggregate, keys=adaptive_sips, users per word, "
             f"{agg.plan.selection_share:.0%} of the budget selects): {len(agg):,} words, each with a noisy user "
             "count and its 95 % interval; the five most used, beside the data's own counts (not released):",
             f"  {'word':<12} {'users':>7} {'95 % interval':>17} {'true users':>11}"]
    for r in got:
        interval = f"[{r['users_low']:,}, {r['users_high']:,}]"
        lines.append(f"  {r['item']:<12} {r['users']:>7,} {interval:>17} {truth[r['item']]:>11,}")
    return lines


def _algorithms(args: argparse.Namespace) -> int:
    described = algorithms()
    if args.json:
        print(json.dumps(described, indent=2, default=_jsonable))
        return EXIT_OK
    for m in described:
        aliases = f" (alias: {', '.join(m['aliases'])})" if m["aliases"] else ""
        print(f"{m['name']}{aliases}  — budgets: {' or '.join(m['budgets'])}")
        print(f"    {m['summary']}")
        print(f"    cite: {m['citation']}")
        if m.get("unproven"):
            print(f"    UNPROVEN: {m['unproven']} (select runs it only with --param allow_unproven=true)")
        for pname, p in m["params"].items():
            default = "derived" if p["default"] is None else repr(p["default"])
            print(f"    --param {pname}=…  (default {default}) {p['doc']}")
        print()
    return EXIT_OK


def _macros(args: argparse.Namespace) -> int:
    if args.test_key is not None and args.test_key < 0:
        raise InvalidParameter(f"--test-key must be an integer >= 0, got {args.test_key}")
    if args.output:
        write_macro_file(args.output, args.test_key)
    else:
        sys.stdout.write(macro_sql(args.test_key))
    if args.test_key is not None:
        print(f"duckdp: test key {args.test_key} is public: seeded, reproducible, NOT private", file=sys.stderr)
    return EXIT_OK


# --- parser ----------------------------------------------------------------------------------

def _input_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", help="parquet/CSV/JSON file or glob, or a DuckDB database file")
    parser.add_argument("--user-col", default="user_id", help="user id column (user_id)")
    parser.add_argument("--item-col", action="append", default=None,
                        help="key column (item); repeat for a composite key")
    parser.add_argument("--table", help="table or view, for a DuckDB database INPUT (opened read-only)")


def _budget_arguments(parser: argparse.ArgumentParser) -> None:
    """--epsilon or --rho (one of them) and --delta: the release's budget."""
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--epsilon", type=float, help="ε of an (ε, δ)-DP budget")
    budget.add_argument("--rho", type=float, help="ρ of a δ-approximate ρ-zCDP budget")
    parser.add_argument("--delta", type=float, required=True, help="δ (required)")


def _output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", required=True, help="where to write the released keys (.parquet or .csv)")
    parser.add_argument("--seed", type=int, help="reproducible run (tests and demos only: not private)")
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary instead of the report")
    ledger = parser.add_argument_group("budgeted runs", "charge the run to a Session ledger kept in a DuckDB file")
    ledger.add_argument("--ledger", metavar="FILE", help="DuckDB database holding the ledger (created if absent)")
    ledger.add_argument("--ledger-table", default="duckdp_ledger", help="ledger table in FILE (duckdp_ledger)")
    ledger.add_argument("--total-epsilon", type=float, help="the ledger's total ε (an (ε, δ) ledger)")
    ledger.add_argument("--total-rho", type=float, help="the ledger's total ρ (a zCDP ledger)")
    ledger.add_argument("--total-delta", type=float, help="the ledger's total δ")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duckdp", description="Differentially private partition selection in DuckDB")
    parser.add_argument("--version", action="version", version=f"duckdp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sel = sub.add_parser("select", help="release keys of a parquet/CSV/JSON file, glob or DuckDB table",
                         description="Release the keys (items) of INPUT under user-level differential privacy.")
    _input_arguments(sel)
    sel.add_argument("--algo", default="weighted_gaussian", help="mechanism (see `duckdp algorithms`)")
    _budget_arguments(sel)
    sel.add_argument("--max-contributions", type=_contributions, default=100, metavar="Δ0",
                     help="keys kept per user (100), or 'auto': chosen privately with 0.5%% of the budget")
    sel.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="mechanism parameter, e.g. --param iterations=3 (repeatable)")
    _truncation_argument(sel, "per_user")
    _output_arguments(sel)
    sel.set_defaults(func=_select)

    pcr = sub.add_parser("count-release", help="release keys with noisy distinct-user counts (Private Count Release)",
                         description="Release keys of INPUT with their noisy distinct-user counts under δ-approximate "
                                     "ρ-zCDP (Rogers et al., Private Count Release).")
    _input_arguments(pcr)
    pcr.add_argument("--rho", type=float, required=True, help="ρ of the zCDP budget")
    pcr.add_argument("--delta", type=float, required=True, help="δ")
    pcr.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="initial_epsilon, delta_per_call, kbar or relative_error, e.g. --param kbar=1000")
    _output_arguments(pcr)
    pcr.set_defaults(func=_count_release)

    agg = sub.add_parser("aggregate", help="private GROUP BY: noisy users, counts, sums and means per key",
                         description="Release keys of INPUT (selected privately, or public ones) with noisy metrics "
                                     "per key, sorted by key (docs/specs/private-group-by.md).")
    agg.add_argument("input", metavar="INPUT", help="parquet/CSV/JSON file or glob, or a DuckDB database file")
    agg.add_argument("--by", action="append", required=True, help="key column; repeat for a composite key")
    agg.add_argument("--user-col", default="user_id", help="user id column (user_id)")
    agg.add_argument("--table", help="table or view, for a DuckDB database INPUT (opened read-only)")
    agg.add_argument("--metric", action="append", required=True, metavar="NAME=KIND[:COLUMN:LOWER:UPPER]",
                     help="users, count, or sum|mean|variance|stddev:COL:LO:HI (repeatable)")
    agg.add_argument("--keys", default="adaptive_sips",
                     help="a select() mechanism, 'threshold', or a parquet/CSV file of public keys (adaptive_sips)")
    _budget_arguments(agg)
    agg.add_argument("--max-contributions", type=_contributions, default=100, metavar="Δ0",
                     help="keys kept per user (100), or 'auto': chosen privately with 0.5%% of ρ")
    agg.add_argument("--max-rows-per-key", type=int, default=1, metavar="M", help="rows per user and key (1)")
    agg.add_argument("--selection-share", type=float,
                     help="share of the budget for selecting keys (0.4; 0.6 with --keys threshold)")
    agg.add_argument("--pre-threshold", type=int, default=1, metavar="K", help="only keys with ≥ K users (1)")
    agg.add_argument("--confidence", type=float, help="add NAME_low/NAME_high intervals at this level, e.g. 0.95")
    agg.add_argument("--not-null", action="append", default=[], metavar="COLUMN",
                     help="declare a value column free of NULLs: its means divide by the row count (repeatable)")
    agg.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="mechanism parameter")
    _truncation_argument(agg, DEFAULT_TRUNCATION)
    _output_arguments(agg)
    agg.set_defaults(func=_aggregate)

    exp = sub.add_parser("explain", help="what a key needs to be released at a budget (no data read)",
                         description="Explain, from the privacy budget alone, the noise and threshold of each "
                                     "round and how many users a key needs to be released.")
    exp.add_argument("algo", metavar="ALGO", help="mechanism (see `duckdp algorithms`)")
    _budget_arguments(exp)
    exp.add_argument("--max-contributions", type=int, default=100, metavar="Δ0", help="keys kept per user (100)")
    exp.add_argument("--keys-per-user", type=int, nargs="+", metavar="K",
                     help="rows of the users table: keys each holder holds (default 1, 2, 5, … up to Δ0)")
    exp.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="mechanism parameter")
    _truncation_argument(exp, "per_user")
    exp.add_argument("--json", action="store_true", help="print a machine-readable summary")
    exp.set_defaults(func=_explain)

    exa = sub.add_parser("explain-aggregate", help="what an aggregate would release: users a key needs, each "
                                                   "metric's noise (no data read)",
                         description="Explain, from the arguments of `duckdp aggregate` alone, its plan, what a key "
                                     "needs to be released and each metric's noise as an interval ± in its units.")
    exa.add_argument("--metric", action="append", required=True, metavar="NAME=KIND[:COLUMN:LOWER:UPPER]",
                     help="users, count, or sum|mean|variance|stddev:COL:LO:HI (repeatable)")
    exa.add_argument("--keys", default="adaptive_sips",
                     help="a select() mechanism, 'threshold' or 'public' (adaptive_sips)")
    _budget_arguments(exa)
    exa.add_argument("--max-contributions", type=int, default=100, metavar="Δ0", help="keys kept per user (100)")
    exa.add_argument("--max-rows-per-key", type=int, default=1, metavar="M", help="rows per user and key (1)")
    exa.add_argument("--selection-share", type=float,
                     help="share of the budget for selecting keys (0.4; 0.6 with --keys threshold)")
    exa.add_argument("--pre-threshold", type=int, default=1, metavar="K", help="only keys with ≥ K users (1)")
    exa.add_argument("--confidence", type=float, default=0.95, help="the intervals' level (0.95)")
    exa.add_argument("--not-null", action="append", default=[], metavar="COLUMN",
                     help="a value column declared free of NULLs (repeatable)")
    exa.add_argument("--counts", type=int, nargs="+", default=list(DEFAULT_COUNTS), metavar="N",
                     help="noisy counts to show a mean's interval at (10 100 1000)")
    exa.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="mechanism parameter")
    _truncation_argument(exa, DEFAULT_TRUNCATION)
    exa.add_argument("--json", action="store_true", help="print a machine-readable summary")
    exa.set_defaults(func=_explain_aggregate)

    demo = sub.add_parser("demo", help="compare the mechanisms on the built-in demo dataset")
    demo.add_argument("--algos", nargs="+", help="mechanisms to run (default: every registered one)")
    demo_budget = demo.add_mutually_exclusive_group()
    demo_budget.add_argument("--rho", type=float, default=0.5, help="ρ of the zCDP budget (0.5)")
    demo_budget.add_argument("--epsilon", type=float, help="use an (ε, δ)-DP budget instead of ρ")
    demo.add_argument("--delta", type=float, default=1e-6, help="δ (1e-6)")
    demo.add_argument("--max-contributions", type=int, default=100, metavar="Δ0")
    demo.add_argument("--seed", type=int, default=None, help="reproducible numbers (not private)")
    demo.add_argument("--verbose", action="store_true", help="also print every release's full report")
    demo.set_defaults(func=_demo)

    algos = sub.add_parser("algorithms", help="list mechanisms, their parameters and citations")
    algos.add_argument("--json", action="store_true")
    algos.set_defaults(func=_algorithms)

    macros = sub.add_parser("macros", help="write the DuckDB shell macro file, keyed by a fresh secret",
                            description="Write the DuckDB shell macros with a fresh 256-bit secret from os.urandom "
                                        "(keep the file private).")
    macros.add_argument("-o", "--output", help="write to this file, created mode 0600 (default: stdout)")
    macros.add_argument("--test-key", type=int, metavar="N",
                        help="use the public key of test N: reproducible under setseed(), NOT private")
    macros.set_defaults(func=_macros)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "item_col", "absent") is None:
        args.item_col = ["item"]
    try:
        return args.func(args)
    except DuckDPError as exc:
        print(f"duckdp: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("duckdp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `duckdp macros | head`: stop quietly
        sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except Exception as exc:  # anything else is our bug: say so without a traceback
        print(f"duckdp: internal error ({type(exc).__name__}): {_first_line(exc)}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
