"""The shipped DuckDB macro file (`sql/macros.sql`) and its installation from Python.

In a DuckDB shell the file's noise comes from random() (not cryptographic). `install_macros`
installs the same macros but replaces the file's noise hooks with duckdp's keyed noise UDFs
(AES-128 PRF of duckdp/prf.py, key from os.urandom unless seeded), registered on the connection
under the hook names, so `SELECT * FROM duckdp_weighted_gaussian(...)` draws cryptographic noise.
The macros' counters are still 64-bit salted SQL hashes of the keys (pure SQL has no collision
resolution), unlike duckdp.select's injective counters (duckdp/counters.py).
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

    The UDFs `duckdp_salt()` and `duckdp_gaussian_noise(value, scale, counter)` stay registered
    for the connection's lifetime (reinstalling replaces them). Every noise value is a keyed
    function of its counter (an item hash xor a per-round salt), so each item gets fresh noise in
    each round. `seed` makes runs reproducible (tests and demos only; not private).
    """
    randomness = Randomness(seed)
    tag = randomness.next_round()           # one noise sub-key; counters carry the per-round salt

    def add_noise(value, scale, counter):
        v = value.to_numpy(zero_copy_only=False)
        s = scale.to_numpy(zero_copy_only=False)
        c = counter.to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
        z = randomness.noise("gaussian", tag, np.zeros_like(c), c)
        return pa.array(v + s * z, type=pa.float64())

    for name in UDF_NAMES:
        try:
            con.remove_function(name)
        except Exception:  # not registered yet
            pass
    con.create_function("duckdp_salt", randomness.salt, [], "UBIGINT", side_effects=True)
    con.create_function("duckdp_gaussian_noise", add_noise, ["DOUBLE", "DOUBLE", "UBIGINT"], "DOUBLE",
                        type="arrow", side_effects=True)
    con.execute(_without_hooks(macro_sql()))
