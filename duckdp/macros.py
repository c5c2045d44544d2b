"""The shipped DuckDB macro file (`sql/macros.sql`) and its installation from Python.

In a DuckDB shell the file's noise comes from random() (not cryptographic). `install_macros`
installs the same macros but replaces the file's noise hooks with duckdp's keyed noise UDFs
(AES-128 PRF of duckdp/prf.py, key from os.urandom unless seeded), registered on the connection
under the hook names, so `SELECT * FROM duckdp_weighted_gaussian(...)` draws cryptographic noise.
The macros' PRF inputs are (the round's salt, the key's rank among the round's keys): injective on
the keys of a round, like duckdp.select's counters (duckdp/counters.py), without a digest.
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from .rng import Randomness
from .templates import sql_dir

_HOOKS = re.compile(r"^-- <duckdp:noise-hooks>.*?^-- </duckdp:noise-hooks>\n", re.S | re.M)
# The hook functions the macros call; install_macros registers these names as UDFs.
UDF_NAMES = ("duckdp_salt", "duckdp_gaussian_noise")


def macro_sql() -> str:
    """The text of the shipped macro file (pure SQL, random()-based noise)."""
    return (sql_dir() / "macros.sql").read_text(encoding="utf-8")


def _without_hooks(text: str) -> str:
    stripped, n = _HOOKS.subn("", text)
    if n != 1:
        raise RuntimeError("macros.sql must contain exactly one <duckdp:noise-hooks> block")
    return stripped


def install_macros(con, seed: int | None = None) -> None:
    """Install duckdp's table and scalar macros on `con`, with secure keyed noise.

    The UDFs `duckdp_salt()` and `duckdp_gaussian_noise(value, scale, salt, key_id)` stay registered
    for the connection's lifetime (reinstalling replaces them). Every noise value is the AES PRF of
    (per-round salt, the key's rank among the round's keys), so distinct keys get independent noise
    and each round fresh noise. `seed` makes runs reproducible (tests and demos only; not private).
    """
    randomness = Randomness(seed)
    tag = randomness.next_round()           # one noise sub-key; counters carry the per-round salt

    def add_noise(value, scale, salt, key_id):
        # PRF input (hi, lo) = (the round's salt, the key's rank among the round's keys): distinct
        # keys of a round get distinct inputs, rounds differ in their salts (duckdp/counters.py
        # explains why a data-dependent injective assignment is private).
        v = value.to_numpy(zero_copy_only=False)
        s = scale.to_numpy(zero_copy_only=False)
        hi = salt.to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
        lo = key_id.to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
        z = randomness.noise("gaussian", tag, hi, lo)
        return pa.array(v + s * z, type=pa.float64())

    for name in UDF_NAMES:
        try:
            con.remove_function(name)
        except Exception:  # not registered yet
            pass
    con.create_function("duckdp_salt", randomness.salt, [], "UBIGINT", side_effects=True)
    con.create_function("duckdp_gaussian_noise", add_noise, ["DOUBLE", "DOUBLE", "UBIGINT", "UBIGINT"], "DOUBLE",
                        type="arrow", side_effects=True)
    con.execute(_without_hooks(macro_sql()))
