"""Budget ledgers: rows of charges, hash-chained, with a head record and atomic appends.

`MemoryLedger` keeps rows in a list under a lock. `TableLedger` keeps them in a DuckDB table `T`
plus a one-row head table `T__duckdp_head` (ledger id, row count, last chain value, MAC):

- Chain: row i's `chain` is H(chain of row i−1, its accounting fields), starting from the ledger
  id; H is SHA-256, or HMAC-SHA256 under the owner's `key`. The head's count and chain must
  match the rows, so deleting rows from the end or the whole table is detected; with a key the
  head also carries an HMAC, so it cannot be rewritten to match a truncated table either.
- Anchor (optional file): the last head written, {ledger id, count, chain}. The table must
  extend it (same id, at least that many rows, the same chain value at that row), which detects
  truncation or deletion of both tables by someone who cannot write the file.
- Atomicity: an append is one transaction on the ledger's own cursor that reads and verifies the
  rows, decides the charge, inserts the row and updates the head row only if the head is still
  the one read. DuckDB's optimistic concurrency makes a concurrent update of the head a
  TransactionException (or an update of 0 rows when the other committed first); either rolls
  back and retries from the re-read ledger, and after `ATTEMPTS` conflicts the charge is refused.
"""
from __future__ import annotations

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

from .errors import DataError, InvalidParameter
from .templates import quote_ident


class LedgerError(DataError):
    """A persisted ledger is inconsistent, tampered with, or belongs to a different budget."""


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

    def __init__(self, key: bytes | None = None):
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


def table_parts(name) -> list[str]:
    parts = [name] if isinstance(name, str) else list(name) if isinstance(name, (tuple, list)) else None
    if not parts or len(parts) > 3 or not all(isinstance(p, str) and p and "\x00" not in p for p in parts):
        raise InvalidParameter("ledger_table must be a table name or a (schema, table) / "
                               f"(database, schema, table) tuple of names, got {name!r}")
    return parts


class TableLedger:
    """A ledger in a DuckDB table with a head table and an optional anchor file (module docstring).

    `check(rows)` is the caller's accounting verification, run on every verified read.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, name, *, check: Callable[[list], None],
                 key: bytes | None = None, anchor: str | os.PathLike | None = None):
        parts = table_parts(name)
        self._table = ".".join(quote_ident(p) for p in parts)
        self._head = ".".join(quote_ident(p) for p in parts[:-1] + [parts[-1] + "__duckdp_head"])
        self._where = f"ledger {self._table}"
        self._key, self._check = key, check
        self._anchor = None if anchor is None else os.fspath(anchor)
        self._cur = con.cursor()        # own transactions, independent of the caller's connection
        self._lock = threading.Lock()   # one transaction at a time on this cursor
        with self._lock:
            self._create()
            self._probe_writable()
        _, head = self._snapshot()                  # verify on open, and anchor the head if unanchored
        self._write_anchor(head["ledger_id"], head["count"], head["chain"])

    # -- public -----------------------------------------------------------------------------------
    def rows(self) -> list[Row]:
        """The verified rows, read in one transaction."""
        return self._snapshot()[0]

    def _snapshot(self) -> tuple[list[Row], Row]:
        with self._lock:
            self._cur.execute("BEGIN TRANSACTION")
            try:
                return self._load()
            finally:
                self._rollback()

    def append(self, make_row: MakeRow) -> Row:
        """Atomically: verify, let `make_row(rows)` decide (it may raise to refuse), insert, move the head."""
        with self._lock:
            for attempt in range(ATTEMPTS):
                self._cur.execute("BEGIN TRANSACTION")
                try:
                    rows, head = self._load()
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
                self._write_anchor(head["ledger_id"], len(rows) + 1, row["chain"])
                return row
        raise LedgerError(f"{self._where}: {ATTEMPTS} attempts to record the charge conflicted with other "
                          "sessions on this ledger; nothing was charged or read, try again")

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
    def _exists(self, table: str) -> bool:
        try:
            self._cur.sql(f"SELECT * FROM {table} LIMIT 0")
            return True
        except duckdb.CatalogException:
            return False

    def _create(self) -> None:
        for attempt in range(ATTEMPTS):
            has_table, has_head = self._exists(self._table), self._exists(self._head)
            if has_table and has_head:
                return
            if has_table or has_head:
                missing = self._head if has_table else self._table
                raise LedgerError(f"{self._where}: {missing} is missing, so the ledger cannot be verified "
                                  "(deleted, not a duckdp ledger, or written before ledgers had a head); "
                                  "refusing to use it")
            anchored = self._read_anchor()
            if anchored and anchored["count"] > 0:
                raise LedgerError(f"{self._where} does not exist but the anchor {self._anchor} records "
                                  f"{anchored['count']} charges on it: the ledger was deleted; refusing to start over")
            ledger_id = secrets.token_hex(16)
            try:
                self._cur.execute("BEGIN TRANSACTION")
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
            self._write_anchor(ledger_id, 0, ledger_id, fresh=True)
            return
        raise LedgerError(f"{self._where}: could not be created (conflicting sessions); try again")

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
    def _columns(self, table: str, expected) -> None:
        head = self._cur.sql(f"SELECT * FROM {table} LIMIT 0")
        found = list(zip(head.columns, map(str, head.types), strict=True))
        if found != list(expected):
            raise LedgerError(f"{table} is not a duckdp ledger: columns {found} differ from {list(expected)}")

    def _mac(self, ledger_id: str, count: int, chain: str) -> str | None:
        return _digest(self._key, ["head", ledger_id, count, chain]) if self._key else None

    def _load(self) -> tuple[list[Row], Row]:
        """Rows and head, read in the open transaction and verified (module docstring)."""
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
        anchored = self._read_anchor()
        if anchored is not None:
            at = anchored["count"]
            if (anchored["ledger_id"] != head["ledger_id"] or at > len(rows)
                    or anchored["chain"] != (rows[at - 1]["chain"] if at else head["ledger_id"])):
                raise LedgerError(f"{self._where} does not extend the anchor {self._anchor} ({at} charges): "
                                  "rows were deleted or the ledger was replaced; refusing to use it")
        self._check(rows)
        return rows, head

    # -- anchor file ------------------------------------------------------------------------------
    def _read_anchor(self) -> dict | None:
        if self._anchor is None or not os.path.exists(self._anchor):
            return None
        try:
            with open(self._anchor, encoding="utf-8") as f:
                data = json.load(f)
            ok = (isinstance(data, dict) and set(data) == {"ledger_id", "count", "chain"}
                  and type(data["count"]) is int and data["count"] >= 0
                  and all(isinstance(data[k], str) for k in ("ledger_id", "chain")))
        except (OSError, ValueError) as exc:
            raise LedgerError(f"cannot read the ledger anchor {self._anchor}: {exc}") from None
        if not ok:
            raise LedgerError(f"the ledger anchor {self._anchor} is not a duckdp anchor")
        return data

    def _write_anchor(self, ledger_id: str, count: int, chain: str, fresh: bool = False) -> None:
        """Advance the anchor (never move it back); written to a temporary file, then renamed."""
        if self._anchor is None:
            return
        current = None if fresh else self._read_anchor()
        if current is not None and current["ledger_id"] == ledger_id and current["count"] >= count:
            return
        tmp = f"{self._anchor}.{secrets.token_hex(4)}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"ledger_id": ledger_id, "count": count, "chain": chain}, f)
        os.replace(tmp, self._anchor)
