"""The DuckDB shell macro file (`sql/macros.sql`), rendered with a secret, and its installation.

The template holds placeholders for the PRF secret, the seeded flag and δ's floor (MIN_DELTA); `macro_sql` fills them
with 256 bits from os.urandom (a private file) or with the public key of a numbered test
(`test_key`: reproducible, not private, and every table macro's result gets `duckdp_seeded`).
An unrendered template fails to load (the secret placeholder is not SQL), so no file runs keyless.
"""
from __future__ import annotations

import hashlib
import os

import duckdb

from .errors import InvalidParameter
from .privacy.budget import MIN_DELTA
from .templates import sql_dir

_SECRET, _SEEDED, _SEEDED_COLUMN = "__DUCKDP_SECRET__", "__DUCKDP_SEEDED__", "__DUCKDP_SEEDED_COLUMN__"
_MIN_DELTA = "__DUCKDP_MIN_DELTA__"   # the δ floor of duckdp.privacy.budget, refused below in duckdp_plan
_TEST_KEY_DOMAIN = b"duckdp macros test key "


def secret_of_test_key(test_key: int) -> str:
    """The public secret of test key `test_key`: sha256("duckdp macros test key <N>") in hex."""
    if isinstance(test_key, bool) or not isinstance(test_key, int) or test_key < 0:
        raise InvalidParameter(f"test key must be an integer >= 0, got {test_key!r}")
    return hashlib.sha256(_TEST_KEY_DOMAIN + str(test_key).encode()).hexdigest()


def macro_sql(test_key: int | None = None) -> str:
    """The macro file with a fresh 256-bit secret from os.urandom, or test key `test_key`'s public one."""
    text = (sql_dir() / "macros.sql").read_text(encoding="utf-8")
    for token, count in ((_SECRET, 1), (_SEEDED, 1), (_MIN_DELTA, 2)):
        if text.count(token) != count:
            raise RuntimeError(f"macros.sql must contain {token} exactly {count} time(s)")
    seeded = test_key is not None
    secret = os.urandom(32).hex() if test_key is None else secret_of_test_key(test_key)
    return (text.replace(_SECRET, f"'{secret}'")
                .replace(_SEEDED, "true" if seeded else "false")
                .replace(_MIN_DELTA, repr(float(MIN_DELTA)))
                .replace(_SEEDED_COLUMN, ", true AS duckdp_seeded" if seeded else ""))


def write_macro_file(path: str, test_key: int | None = None) -> None:
    """Write the rendered macro file to `path`, readable by its owner only (mode 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)   # an existing file keeps its mode under O_CREAT
        out.write(macro_sql(test_key))


def install_macros(con: duckdb.DuckDBPyConnection, seed: int | None = None) -> None:
    """Install duckdp's table and scalar macros on `con`, keyed by a fresh secret from os.urandom.

    The macros are the shell's, pure SQL: every noise value and the truncation order are a keyed
    SHA-256 PRF (see the file's header). `seed` uses test key `seed` instead and seeds DuckDB's
    generator (setseed) from it, so runs are reproducible: tests and demos only, not private; the
    table macros' results then carry `duckdp_seeded = true`.
    """
    con.execute(macro_sql(seed))
    if seed is not None:
        con.execute("SELECT setseed(?)", [(seed % 2**31) / 2**31]).fetchall()
