"""The guard file of a persisted ledger: its key and last head, kept outside the database.

A ledger in a database file can be emptied, edited or dropped by anyone who can write that file.
The guard records, where those who run queries cannot write, the ledger's HMAC key (random, from
`os.urandom`, unless the owner passes `key=`) and its anchor: the ledger id, entry count and chain
value after the last charge. On open the database's ledger must verify under the key and extend
the anchor (ledger.py).

Default location: `$XDG_CONFIG_HOME/duckdp/ledgers/<sha256 of (database path, schema, table)>.json`
(`~/.config` when XDG_CONFIG_HOME is unset or relative), directories 0700, file 0600; a guard
readable or writable by group or others is refused. Updates are written to a temporary file and
renamed over the guard (`os.replace`), under an exclusive lock on `<guard>.lock` (POSIX `flock`),
so concurrent sessions never see a partial file nor move the anchor back.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import LedgerError

try:
    import fcntl
except ImportError:      # pragma: no cover - Windows: renames stay atomic, updates are unlocked
    fcntl = None  # type: ignore[assignment]

FORMAT = "duckdp ledger guard 1"


@dataclass(frozen=True)
class Anchor:
    """What a guard file holds: the ledger's key (None when the owner keeps it) and its last head."""

    ledger_id: str
    count: int
    chain: str
    key: bytes | None


def config_dir() -> Path:
    """`$XDG_CONFIG_HOME/duckdp/ledgers`, or `~/.config/duckdp/ledgers` (XDG Base Directory spec)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".config") / "duckdp" / "ledgers"


def default_path(database: str, schema: str, table: str) -> Path:
    """The guard of table `schema.table` in the database file `database` (names compared case-insensitively,
    as DuckDB binds them)."""
    ident = json.dumps([os.path.realpath(database), schema.lower(), table.lower()], ensure_ascii=True)
    return config_dir() / f"{hashlib.sha256(ident.encode()).hexdigest()}.json"


class GuardFile:
    """A guard file at `path`: read, advance (locked, atomic), and look up guards of the same ledger."""

    def __init__(self, path: str | os.PathLike, *, default: bool):
        self.path = Path(path)
        self._default = default      # in the config directory: create it (0700) when needed

    def read(self) -> Anchor | None:
        """The guard's anchor, None if there is no file; LedgerError if it is unsafe or not a guard."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        if os.name == "posix" and st.st_mode & 0o077:
            raise LedgerError(f"the ledger guard {self.path} is accessible to group or others "
                              f"(mode {st.st_mode & 0o777:o}): anyone who can rewrite it can reset the ledger; "
                              "chmod 600 it after checking it is yours")
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            key = None if data["key"] is None else bytes.fromhex(data["key"])
            ok = (data["format"] == FORMAT and type(data["count"]) is int and data["count"] >= 0
                  and all(isinstance(data[k], str) for k in ("ledger_id", "chain"))
                  and (key is None or len(key) >= 16))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"cannot read the ledger guard {self.path}: {exc!r}") from None
        if not ok:
            raise LedgerError(f"{self.path} is not a duckdp ledger guard (or it was edited)")
        return Anchor(data["ledger_id"], data["count"], data["chain"], key)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock (across threads and processes) on the guard, held while it is read and replaced."""
        try:
            self._make_dir()
            fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LedgerError(f"cannot open the ledger guard's lock {self.path}.lock: {exc}") from None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)              # releases the lock

    def write(self, anchor: Anchor, *, database: str | None, table: str) -> None:
        """Replace the guard with `anchor` (call under `locked()`, which made its directory): a temporary
        file 0600, flushed to disk, then renamed over the guard."""
        data = {"format": FORMAT, "database": database, "table": table, "ledger_id": anchor.ledger_id,
                "count": anchor.count, "chain": anchor.chain, "key": None if anchor.key is None else anchor.key.hex()}
        tmp = self.path.with_name(f"{self.path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise LedgerError(f"cannot write the ledger guard {self.path}: {exc}") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise LedgerError(f"cannot write the ledger guard {self.path}: {exc}") from None
            raise

    def set_aside(self, anchor: Anchor) -> Path:
        """Keep the guard of a ledger that is no longer at this place (its database was moved or replaced)
        under a name of its own, `<guard>.<ledger id>.json`, where `others_of` still finds it."""
        kept = self.path.with_name(f"{self.path.stem}.{anchor.ledger_id}.json")
        try:
            os.replace(self.path, kept)
        except OSError as exc:
            raise LedgerError(f"cannot set the ledger guard {self.path} aside: {exc}") from None
        return kept

    def others_of(self, ledger_id: str) -> list[tuple[Path, Anchor]]:
        """Other guards in this guard's directory that record `ledger_id` (the database was moved or copied)."""
        found = []
        for p in sorted(self.path.parent.glob("*.json")):
            if p == self.path:
                continue
            try:
                anchor = GuardFile(p, default=False).read()
            except LedgerError:
                continue
            if anchor is not None and anchor.ledger_id == ledger_id:
                found.append((p, anchor))
        return found

    def _make_dir(self) -> None:
        if not self._default:
            return                    # an explicit anchor= path: its directory is the owner's to make
        top = self.path.parent.parent
        top.parent.mkdir(parents=True, exist_ok=True)
        for d in (top, self.path.parent):
            with contextlib.suppress(FileExistsError):
                os.mkdir(d, 0o700)
