"""Budget ledgers: rows of charges, hash-chained, with a head record and atomic appends.

`MemoryLedger` keeps rows in a list under a lock. `TableLedger` keeps them in a DuckDB table `T`
plus a one-row head table `T__duckdp_head` (ledger id, row count, last chain value, MAC):

- Chain: row i's `chain` is H(chain of row i−1, its accounting fields), starting from the ledger
  id; H is SHA-256, or HMAC-SHA256 under the owner's `key`. The head's count and chain must
  match the rows, so deleting rows from the end or the whole table is detected; with a key the
  head also carries an HMAC, so it cannot be rewritten to match a truncated table either.
- Guard (ledger_guard.py): a file outside the database with the ledger's key (random unless the
  owner passes `key=`) and its anchor, the last head written {ledger id, count, chain}. By default
  every ledger in a database file has one (in the user's config directory). The table must extend
  the anchor (same id, at least that many rows, the same chain value at that row), which detects
  edits, truncation, a reset head and dropped tables by someone who cannot write the guard. A
  ledger found without its guard is refused unless the caller adopts it (`adopt=True`).
- Opening: whether the tables exist is read in one transaction (one snapshot); creating them
  conflicts with a concurrent creation, which is retried as an open. With a guard, opening and
  creating run under the guard's lock, so the guard is written before another session reads it.
- Atomicity: an append is one transaction on the ledger's own cursor that reads and verifies the
  rows, decides the charge, inserts the row and updates the head row only if the head is still
  the one read. DuckDB's optimistic concurrency makes a concurrent update of the head a
  TransactionException (or an update of 0 rows when the other committed first); either rolls
  back and retries from the re-read ledger, and after `ATTEMPTS` conflicts the charge is refused.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import random
import secrets
import threading
import time
from collections.abc import Callable

import duckdb

from .errors import InternalError, InvalidParameter, LedgerError
from .ledger_guard import Anchor, GuardFile, default_path
from .templates import quote_ident

# name, DuckDB type; `chain` covers every column before it, `released`/`error` are the outcome
COLUMNS = (("seq", "BIGINT"), ("time", "TIMESTAMP"), ("algo", "VARCHAR"), ("request", "VARCHAR"),
           ("input", "VARCHAR"), ("events", "VARCHAR"), ("charge", "DOUBLE"), ("charge_delta", "DOUBLE"),
           ("spent", "DOUBLE"), ("spent_delta", "DOUBLE"), ("budget_kind", "VARCHAR"), ("budget", "DOUBLE"),
           ("budget_delta", "DOUBLE"), ("chain", "VARCHAR"), ("released", "BIGINT"), ("error", "VARCHAR"))
HEAD_COLUMNS = (("ledger_id", "VARCHAR"), ("count", "BIGINT"), ("chain", "VARCHAR"), ("mac", "VARCHAR"))
NAMES = [c for c, _ in COLUMNS]
CHAINED = NAMES[:NAMES.index("chain")]
ATTEMPTS = 50

Row = dict
MakeRow = Callable[[list], Row]


def _digest(key: bytes | None, payload: list) -> str:
    data = json.dumps(payload, ensure_ascii=True).encode()
    return hmac.new(key, data, hashlib.sha256).hexdigest() if key else hashlib.sha256(data).hexdigest()


def chain_of(key: bytes | None, previous: str, row: Row) -> str:
    """H(previous chain value, the row's accounting fields (floats by repr, time as ISO text))."""
    fields = [row[c].isoformat() if c == "time" else repr(row[c]) if isinstance(row[c], float) else row[c]
              for c in CHAINED]
    return _digest(key, [previous] + fields)


class MemoryLedger:
    """Rows in memory for a session without `ledger_table`; appends are serialised by a lock."""

    def __init__(self, key: bytes | None = None) -> None:
        self._rows: list[Row] = []
        self._key = key
        self._lock = threading.Lock()

    def rows(self) -> list[Row]:
        with self._lock:
            return [dict(r) for r in self._rows]

    def append(self, make_row: MakeRow) -> Row:
        with self._lock:
            row = make_row([dict(r) for r in self._rows])
            row["seq"] = len(self._rows)
            row |= {"chain": chain_of(self._key, self._rows[-1]["chain"] if self._rows else "", row),
                    "released": None, "error": None}
            self._rows.append(row)
            return dict(row)

    def finish(self, seq: int, released: int | None, error: str | None) -> None:
        with self._lock:
            self._rows[seq].update(released=released, error=error)


def table_parts(name: object) -> list[str]:
    parts = [name] if isinstance(name, str) else list(name) if isinstance(name, (tuple, list)) else None
    if not parts or len(parts) > 3 or not all(isinstance(p, str) and p and "\x00" not in p for p in parts):
        raise InvalidParameter("ledger_table must be a table name or a (schema, table) / "
                               f"(database, schema, table) tuple of names, got {name!r}")
    return parts


class TableLedger:
    """A ledger in a DuckDB table with a head table, guarded by a file outside the database (module docstring).

    `check(rows)` is the caller's accounting verification, run on every verified read. `anchor`: None
    (a guard in the user's config directory when the table is in a database file, none in memory),
    a guard file path, or False (no guard). `adopt=True` accepts an existing ledger that has no guard
    (or whose guard records another ledger) after verifying what can be verified, and writes its guard.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, name: object, *, check: Callable[[list], None],
                 key: bytes | None = None, anchor: str | os.PathLike | bool | None = None, adopt: bool = False):
        parts = table_parts(name)
        self._table = ".".join(quote_ident(p) for p in parts)
        self._head = ".".join(quote_ident(p) for p in parts[:-1] + [parts[-1] + "__duckdp_head"])
        self._where = f"ledger {self._table}"
        self._key, self._check = key, check
        self._cur = con.cursor()        # own transactions, independent of the caller's connection
        self._lock = threading.Lock()   # one transaction at a time on this cursor
        with self._lock:
            self._database, schema, table = self._locate(parts)
        self._label = f"{schema}.{table}"
        self._guard: GuardFile | None = None
        if isinstance(anchor, (str, os.PathLike)):
            self._guard = GuardFile(anchor, default=False)
        elif anchor is None and self._database is not None:
            self._guard = GuardFile(default_path(self._database, schema, table), default=True)
        self._guard_at = str(self._guard.path) if self._guard else ""
        self._guard_key: bytes | None = None      # the key the guard file holds (None: the owner keeps it)
        with self._guard.locked() if self._guard else contextlib.nullcontext():
            self._open(key, adopt)

    # -- public -----------------------------------------------------------------------------------
    def rows(self) -> list[Row]:
        """The verified rows, read in one transaction."""
        return self._snapshot(self._current_anchor())[0]

    def _snapshot(self, anchor: Anchor | None) -> tuple[list[Row], Row]:
        """Rows and head verified in one transaction, against an anchor read before it began (the guard
        advances only after a commit, so a concurrent charge never puts it ahead of the snapshot)."""
        with self._lock:
            self._cur.execute("BEGIN TRANSACTION")
            try:
                return self._load(anchor)
            finally:
                self._rollback()

    def append(self, make_row: MakeRow) -> Row:
        """Atomically: verify, let `make_row(rows)` decide (it may raise to refuse), insert, move the head;
        then advance the guard."""
        with self._lock:
            for attempt in range(ATTEMPTS):
                anchor = self._current_anchor()         # before the transaction, as in _snapshot
                self._cur.execute("BEGIN TRANSACTION")
                try:
                    rows, head = self._load(anchor)
                    row = make_row(rows)
                    row["seq"] = len(rows)
                    row |= {"chain": chain_of(self._key, head["chain"], row), "released": None, "error": None}
                    self._cur.execute(f"INSERT INTO {self._table} VALUES ({', '.join('$' + c for c in NAMES)})", row)
                    (moved,), = self._cur.execute(
                        f"UPDATE {self._head} SET count = $n, chain = $chain, mac = $mac "
                        "WHERE count = $old AND chain = $old_chain",
                        {"n": len(rows) + 1, "chain": row["chain"], "mac": self._mac(head["ledger_id"], len(rows) + 1,
                                                                                    row["chain"]),
                         "old": len(rows), "old_chain": head["chain"]}).fetchall()
                    if moved != 1:
                        raise duckdb.TransactionException("the head moved since it was read")
                    self._cur.execute("COMMIT")
                except duckdb.TransactionException:
                    self._rollback()
                    time.sleep(random.uniform(0, 0.002 * 2 ** min(attempt, 6)))
                    continue
                except BaseException:
                    self._rollback()
                    raise
                break
            else:
                raise LedgerError(f"{self._where}: {ATTEMPTS} attempts to record the charge conflicted with other "
                                  "sessions on this ledger; nothing was charged or read, try again")
        if self._guard is not None:
            with self._guard.locked():
                current = self._guard.read()
                if current is not None and current.ledger_id == head["ledger_id"] and current.count < len(rows) + 1:
                    self._store(head["ledger_id"], len(rows) + 1, row["chain"])
        return row

    def finish(self, seq: int, released: int | None, error: str | None) -> None:
        """Record a charged call's outcome (outside the chain; the charge is already final)."""
        with self._lock:
            for attempt in range(ATTEMPTS):
                try:
                    self._cur.execute(f"UPDATE {self._table} SET released = $released, error = $error WHERE seq = $seq",
                                      {"released": released, "error": error, "seq": seq})
                    return
                except duckdb.TransactionException:
                    time.sleep(random.uniform(0, 0.002 * 2 ** min(attempt, 6)))

    # -- opening ----------------------------------------------------------------------------------
    def _locate(self, parts: list[str]) -> tuple[str | None, str, str]:
        """(database file or None when in memory, schema, table) the name binds to, as DuckDB binds it."""
        (current, schema), = self._cur.execute("SELECT current_database(), current_schema()").fetchall()
        if len(parts) == 3:
            current, schema = parts[0], parts[1]
        elif len(parts) == 2:
            (is_schema, is_database), = self._cur.execute(
                "SELECT (SELECT count(*) FROM duckdb_schemas() WHERE database_name = $db "
                "AND lower(schema_name) = lower($p)), "
                "(SELECT count(*) FROM duckdb_databases() WHERE lower(database_name) = lower($p))",
                {"db": current, "p": parts[0]}).fetchall()
            current, schema = (parts[0], "main") if is_database and not is_schema else (current, parts[0])
        paths = self._cur.execute("SELECT path FROM duckdb_databases() WHERE lower(database_name) = lower($db)",
                                  {"db": current}).fetchall()
        return (paths[0][0] if paths else None), schema, parts[-1]

    def _open(self, key: bytes | None, adopt: bool) -> None:
        """Create the ledger, or verify the existing one against its guard; under the guard's lock."""
        guard = self._guard.read() if self._guard else None
        with self._lock:
            head = self._create(guard, key, adopt)
            self._probe_writable()
        if head is None:                       # created, and its guard written
            return
        anchor = self._anchor_of(head, guard, adopt) if self._guard else None
        if anchor is not None and anchor.key is not None:
            if key is not None and not hmac.compare_digest(key, anchor.key):
                raise LedgerError(f"{self._where}: key= is not the key its guard {self._guard_at} "
                                  "holds (wrong key); open it without key=")
            self._key = anchor.key
        if head["mac"] is not None and self._key is None:
            raise LedgerError(f"{self._where} is keyed but no key is available: pass the owner's key=, or restore "
                              f"the guard file that held its key{f' ({self._guard_at})' if self._guard else ''}")
        self._guard_key = self._key if key is None or (anchor is not None and anchor.key is not None) else None
        rows, head = self._snapshot(anchor)
        if self._guard is not None and (guard is None or guard.ledger_id != head["ledger_id"]
                                        or guard.count < len(rows) or guard.key != self._guard_key):
            if guard is not None and guard.ledger_id != head["ledger_id"]:
                self._guard.set_aside(guard)
            self._store(head["ledger_id"], len(rows), head["chain"])

    def _anchor_of(self, head: Row, guard: Anchor | None, adopt: bool) -> Anchor | None:
        """The anchor an existing ledger must extend: its guard's; without one (or with one recording another
        ledger) a LedgerError, or with `adopt` the guard of this ledger found elsewhere (a moved database)."""
        if self._guard is None:
            raise InternalError("invariant failed: a guarded ledger has its guard")
        if guard is not None and guard.ledger_id == head["ledger_id"]:
            return guard
        if not adopt:
            others = "".join(f"; a guard of this ledger is at {p} (the database was moved or copied?)"
                             for p, _ in self._guard.others_of(head["ledger_id"]))
            what = (f"its guard {self._guard_at} is missing" if guard is None else
                    f"its guard {self._guard_at} records another ledger ({guard.count} charges): "
                    "the ledger was replaced")
            database = self._database or "an in-memory database"
            raise LedgerError(f"{self._where} in {database} has {head['count']} charge(s) but {what}{others}. "
                              "Refusing to use it: an unguarded ledger may have been reset. Restore the guard "
                              "file, or pass adopt=True to trust the database's ledger as it is and write a new "
                              "guard (anchor=False opts out of guards)")
        found = sorted(self._guard.others_of(head["ledger_id"]), key=lambda pa: pa[1].count)
        return found[-1][1] if found else None

    def _create(self, guard: Anchor | None, key: bytes | None, adopt: bool) -> Row | None:
        """The raw head row of the existing ledger, or None after creating it; existence is read in one
        snapshot, and a concurrent creation makes this one conflict and look again."""
        for attempt in range(ATTEMPTS):
            self._cur.execute("BEGIN TRANSACTION")
            try:
                has_table, has_head = self._exists(self._table), self._exists(self._head)
                if has_table and has_head:
                    heads = self._cur.sql(f"SELECT * FROM {self._head}").to_arrow_table().to_pylist()
                    if len(heads) != 1 or list(heads[0]) != [c for c, _ in HEAD_COLUMNS]:
                        return self._load(None)[1]          # raises what is wrong with the head
                    return heads[0]
                if has_table or has_head:
                    missing = self._head if has_table else self._table
                    raise LedgerError(f"{self._where}: {missing} is missing, so the ledger cannot be verified "
                                      "(deleted, not a duckdp ledger, or written before ledgers had a head); "
                                      "refusing to use it")
                if guard is not None and guard.count > 0 and not adopt:
                    raise LedgerError(f"{self._where} does not exist but its guard {self._guard_at} records "
                                      f"{guard.count} charge(s) on it: the ledger was deleted (or the database "
                                      "replaced); refusing to start over. Pass adopt=True to start a new ledger "
                                      "at this place on purpose")
                ledger_id = secrets.token_hex(16)
                new_key = key if key is not None or self._guard is None else os.urandom(32)
                self._key = new_key
                self._cur.execute(f"CREATE TABLE {self._table} "
                                  f"({', '.join(f'{quote_ident(c)} {t}' for c, t in COLUMNS)})")
                self._cur.execute(f"CREATE TABLE {self._head} "
                                  f"({', '.join(f'{quote_ident(c)} {t}' for c, t in HEAD_COLUMNS)})")
                self._cur.execute(f"INSERT INTO {self._head} VALUES ($id, 0, $id, $mac)",
                                  {"id": ledger_id, "mac": self._mac(ledger_id, 0, ledger_id)})
                self._cur.execute("COMMIT")
            except (duckdb.TransactionException, duckdb.CatalogException):
                self._rollback()             # created concurrently: look again
                time.sleep(random.uniform(0, 0.002 * 2 ** min(attempt, 6)))
                continue
            except duckdb.Error as exc:
                self._rollback()
                raise LedgerError(f"cannot open ledger table {self._table} for writing: {exc}") from None
            finally:
                self._rollback()
            if self._guard is not None:
                if guard is not None and guard.count > 0:
                    self._guard.set_aside(guard)
                self._guard_key = new_key if key is None else None
                self._store(ledger_id, 0, ledger_id)
            return None
        raise LedgerError(f"{self._where}: could not be created (conflicting sessions); try again")

    def _exists(self, table: str) -> bool:
        try:
            self._cur.sql(f"SELECT * FROM {table} LIMIT 0")
            return True
        except duckdb.CatalogException:
            return False

    def _probe_writable(self) -> None:
        try:
            self._cur.execute(f"UPDATE {self._head} SET count = count WHERE false")
        except duckdb.Error as exc:
            raise LedgerError(f"cannot open ledger table {self._table} for writing: {exc}") from None

    def _rollback(self) -> None:
        try:
            self._cur.execute("ROLLBACK")
        except duckdb.Error:
            pass

    # -- verification -----------------------------------------------------------------------------
    def _columns(self, table: str, expected: tuple[tuple[str, str], ...]) -> None:
        head = self._cur.sql(f"SELECT * FROM {table} LIMIT 0")
        found = list(zip(head.columns, map(str, head.types), strict=True))
        if found != list(expected):
            raise LedgerError(f"{table} is not a duckdp ledger: columns {found} differ from {list(expected)}")

    def _mac(self, ledger_id: str, count: int, chain: str) -> str | None:
        return _digest(self._key, ["head", ledger_id, count, chain]) if self._key else None

    def _load(self, anchored: Anchor | None) -> tuple[list[Row], Row]:
        """Rows and head, read in the open transaction and verified, also against `anchored` (module docstring)."""
        try:
            self._columns(self._table, COLUMNS)
            self._columns(self._head, HEAD_COLUMNS)
        except duckdb.CatalogException:
            raise LedgerError(f"{self._where} or its head {self._head} was dropped; refusing to use it") from None
        heads = self._cur.sql(f"SELECT * FROM {self._head}").to_arrow_table().to_pylist()
        if len(heads) != 1:
            raise LedgerError(f"{self._where}: the head table {self._head} has {len(heads)} rows, not 1 (altered)")
        (head,) = heads
        if head["mac"] is None and self._key:
            raise LedgerError(f"{self._where} was not created with a key (or its head was altered); "
                              "open it without key=")
        if head["mac"] is not None and not self._key:
            raise LedgerError(f"{self._where} is keyed: pass the owner's key= to open it")
        if self._key and not hmac.compare_digest(head["mac"],
                                                 self._mac(head["ledger_id"], head["count"], head["chain"])):
            raise LedgerError(f"{self._where}: the head's MAC does not match (altered, or a different key)")
        rows = self._cur.sql(f"SELECT * FROM {self._table} ORDER BY seq").to_arrow_table().to_pylist()
        previous = head["ledger_id"]
        for i, row in enumerate(rows):
            if row["seq"] != i:
                raise LedgerError(f"{self._where}: sequence numbers are not 0..{len(rows) - 1} "
                                  f"(row {i} has {row['seq']})")
            if any(row[c] is None for c in CHAINED) or row["chain"] != chain_of(self._key, previous, row):
                raise LedgerError(f"{self._where}: row {i} was altered (its chain hash does not match)")
            if row["released"] is not None and row["released"] < 0:
                raise LedgerError(f"{self._where}: row {i} has a negative released count")
            previous = row["chain"]
        if head["count"] != len(rows) or head["chain"] != previous:
            raise LedgerError(f"{self._where}: the head records {head['count']} charges but the table has "
                              f"{len(rows)} matching rows: rows were deleted or added; refusing to use it")
        if anchored is not None:
            at = anchored.count
            if (anchored.ledger_id != head["ledger_id"] or at > len(rows)
                    or anchored.chain != (rows[at - 1]["chain"] if at else head["ledger_id"])):
                raise LedgerError(f"{self._where} does not extend its guard {self._guard_at} "
                                  f"({at} charges): rows were deleted or edited, the head was reset, or the ledger "
                                  "was replaced; refusing to use it")
        self._check(rows)
        return rows, head

    # -- guard file -------------------------------------------------------------------------------
    def _current_anchor(self) -> Anchor | None:
        """The guard's anchor for a verification after opening: the guard must still be there, with its key."""
        if self._guard is None:
            return None
        anchored = self._guard.read()
        if anchored is None:
            raise LedgerError(f"{self._where}: its guard {self._guard.path} was deleted while in use; refusing to "
                              "use the ledger (restore the guard file)")
        if anchored.key != self._guard_key:
            raise LedgerError(f"{self._where}: the key in its guard {self._guard.path} changed while in use (edited)")
        return anchored

    def _store(self, ledger_id: str, count: int, chain: str) -> None:
        """Write the guard (under its lock): this ledger's key if the guard holds it, and its last head."""
        if self._guard is None:
            raise InternalError("invariant failed: a guarded ledger has its guard")
        self._guard.write(Anchor(ledger_id, count, chain, self._guard_key), database=self._database,
                          table=self._label)
