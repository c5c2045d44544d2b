"""Injective PRF counters for keys, computed natively in SQL, and resolution of digest collisions.

Each key gets a 128-bit counter (hi, lo), two 64-bit columns `_dp_chi`, `_dp_clo`. Unseeded releases
of non-integer keys skip the digest below: multi-round mechanisms run on key ids (below), one-round
ones count each key by its position in the round's stream (duckdp/noise_stage.py); both injective
and free. Otherwise (seeded releases, integer keys):
- one integer key column (TINYINT … HUGEINT, UTINYINT … UHUGEINT): the integer itself, as a
  128-bit two's complement (hi = upper, lo = lower 64 bits). Injective; no check needed.
- anything else (composite keys, VARCHAR, BLOB, LIST, STRUCT, UUID, DATE, …): the MD5 digest of
  the encoding  enc = ‖_i len(s_i) ':' s_i  with s_i = CAST(col_i AS VARCHAR) (hex(col_i) for
  BLOB) and len in bytes; hi = md5_number_upper(enc) = digest bytes 0–7 read little-endian,
  lo = md5_number_lower(enc) = bytes 8–15 little-endian. (Spark: `md5` of the same string.)
  The length prefix makes the encoding of a tuple of strings injective; the casts and MD5 need not
  be: keys present with equal counters are *detected* (GROUP BY counter HAVING count(*) > 1) and
  ranked by their values inside each group (a total order), and rank r > 0 draws from sub-key
  K[round, r] instead of K[round, 0] (duckdp/prf.py). So distinct keys present in a round always
  get distinct (sub-key, counter) pairs.

Why a data-dependent assignment is private. Fix an input D. The PRF key K is drawn independently
of D, and the map key ↦ (sub-key label, counter) is injective on the keys noised in a round (and
rounds use disjoint labels). For a truly random function every injective assignment of inputs
yields i.i.d. uniforms, so the noise vector on D has exactly the distribution the mechanism's
analysis assumes, for every D separately; which inputs D's keys map to is irrelevant. With AES
as a PRF, the real output is computationally indistinguishable from that (duckdp/prf.py).

Key ids (unseeded multi-round mechanisms, DuckDBStages.round_pairs). The run's distinct keys go
into a TEMP dictionary once, each with the id `key_id_sql` = DuckDB's hash of the key columns. Where
no two keys present share it (checked exactly over the dictionary's distinct keys) every key keeps
it; where a few do, only those keys take a second candidate, `second_id_sql` (the upper half of
their MD5 digest counter), kept when those are distinct and none is a key's hash (checked exactly),
so each pair computes its id from its own key (no join); otherwise, and for key types whose equality
is not equality of the hashed value (floats, nested types, …: `hashable`), the id is the dictionary
row's rowid (the keys that share a hash numbered after them, in (hash, second candidate, key)
order). Each way the id is injective over the keys of the run, so over the keys of every round, and
every round runs on it: joins and GROUP BYs on an injective relabelling compute the same sets and
sums, and the id is the key's PRF counter (0, id), injective as the argument above needs. Its
assignment depends on the data (which keys collide, which candidates clash, rowids); that is
allowed by the argument above, since the PRF key is secret, fresh for the run and drawn
independently of the data. Whether a run uses ids depends only on the call (unseeded, key types,
mechanism), and every kind of id gives the same truncation (below) and the same weights up to the
relabelling, so the choice between them, which does depend on the data, changes nothing but the
(i.i.d.) counters. Key order is used only as
a tie-break where any tie order gives the same numbers (MAD2R's water-filling, mad2r_biased.sql:
its candidate λ_r depend on the sorted values alone). The id is never released: the output stage
maps ids back to the dictionary's key columns and sorts by them, so the output (rows, order, dtypes)
is that of the key path. Seeded releases keep the digest (the same release at any thread count, and
on Spark).

Private GROUP BY (duckdp/mechanisms/aggregate/duckdb.py) lists its keys sorted by key; unseeded calls
on non-integer keys count each key by its position in that list (injective over its keys, the same
argument), seeded ones keep the digest.

Truncation order keeps `hash(xor(hash(user, keys), $salt))`, ties broken by the key itself where
the hash can collide (DuckDBStages.truncation_order): any fixed function of the user's own data and
a secret independent of the data is an allowed per-user truncation (sensitivity arguments hold for
every choice of kept set), but a tie left to the engine would follow the order rows arrive in, a
function of other users' data; collisions between users or keys cannot couple noise, which never
comes from these hashes. On key ids the order hashes (user, hash of the key columns) instead of (user, key
columns): again a fixed function of the pair and the salt, the same whichever id the dictionary
gave (DuckDBStages.truncate), so never a function of other users' data. Its ties (only between keys
of one hash) break on the id, which among such keys follows (second candidate, key): a fixed
function of the keys, the same for every kind of id.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_MASK = "18446744073709551615"


@dataclass(frozen=True)
class _IntegerRule:
    """One integer key type's counter: (hi, lo) as SQL over `_dp_k0`, and the same numbers from the
    key column's numpy values (None where numpy has no such integer: the 128-bit types)."""
    hi_sql: str
    lo_sql: str
    arrays: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None


def _sign_extend(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return -(k < 0).astype(np.int64), k.astype(np.int64)


def _zero_extend(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(k.size, np.uint64), k.astype(np.uint64)


# The per-type rule, the one table both counter_sql and counter_arrays read. Signed types sign-extend
# (hi = −1 for negative keys, lo = the key's bits as BIGINT), unsigned ones zero-extend; the 128-bit
# types split into their upper and lower 64 bits.
_SIGNED = _IntegerRule("-(_dp_k0 < 0)::BIGINT", "_dp_k0::BIGINT", _sign_extend)
_UNSIGNED = _IntegerRule("0::UBIGINT", "_dp_k0::UBIGINT", _zero_extend)
INTEGER_COUNTERS: dict[str, _IntegerRule] = {
    **dict.fromkeys(("TINYINT", "SMALLINT", "INTEGER", "BIGINT"), _SIGNED),
    **dict.fromkeys(("UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"), _UNSIGNED),
    "HUGEINT": _IntegerRule("(_dp_k0 >> 64)::BIGINT", f"(_dp_k0 & {_MASK}::HUGEINT)::UBIGINT", None),
    "UHUGEINT": _IntegerRule("(_dp_k0 >> 64)::UBIGINT", f"(_dp_k0 & {_MASK}::UHUGEINT)::UBIGINT", None),
}
_HASHABLE = set(INTEGER_COUNTERS) | {"VARCHAR", "BLOB", "BOOLEAN", "DATE", "UUID"}


def _integer_rule(key_types: list[str]) -> _IntegerRule | None:
    return INTEGER_COUNTERS.get(key_types[0].upper()) if len(key_types) == 1 else None


def key_id_sql(columns: list[str]) -> str:
    """The key id candidate of key columns `columns` (SQL expressions): DuckDB's 64-bit hash of them,
    injective only where checked (module docstring, "Key ids")."""
    return f"hash({', '.join(columns)})"


def hashable(key_types: list[str]) -> bool:
    """Whether equal keys of these types always have equal hashes and unequal ones unequal values
    (no -0.0/0.0 or NaN forms, collations or nested values): then hash ids need no join."""
    return all(t.upper() in _HASHABLE for t in key_types)


# Types whose DuckDB 64-bit hash is injective on their values: integers of at most 64 bits, DECIMAL of at most 18
# digits (stored as one such integer) and floats (−0.0 and NaN are normalised, and compare equal): the hash is a
# bijection of the value's bits. 128-bit types (HUGEINT, UHUGEINT, DECIMAL of 19–38 digits) combine their halves'
# hashes and collide: hash(2⁶⁴ + 2::HUGEINT) = hash(2⁶⁵ + 1::HUGEINT). Everything else (strings, nested, …) can.
_HASH_INJECTIVE = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
                   "FLOAT", "DOUBLE"}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*\d+\)")


def type_hash_injective(type_name: str) -> bool:
    """Whether DuckDB's hash is injective on values of the type `type_name` (as `str(DuckDBPyType)` writes it,
    e.g. "BIGINT", "DECIMAL(18,2)"). Read by the truncation's tie-break on keys (`hash_injective`) and the
    aggregate's row sample on value columns (mechanisms/aggregate/duckdb.py): a hash that can tie must be
    broken by the value, not by the order rows arrive in."""
    name = type_name.upper()
    decimal = _DECIMAL.fullmatch(name)
    return name in _HASH_INJECTIVE or (decimal is not None and int(decimal[1]) <= 18)


def hash_injective(key_types: list[str]) -> bool:
    """Whether DuckDB's hash is injective on keys of these types: one column of a type `type_hash_injective`
    admits. Composites (their hash combines the columns'), strings and 128-bit types can collide."""
    return len(key_types) == 1 and type_hash_injective(key_types[0])


def collisions_possible(key_types: list[str]) -> bool:
    """Whether keys of these types take digest counters (collisions possible, ranked among the keys present)
    rather than an integer rule (injective, the same whichever keys a round noises)."""
    return _integer_rule(key_types) is None


def counter_sql(key_types: list[str]) -> tuple[str, str, bool]:
    """SQL of (hi, lo) over the internal key columns `_dp_k0, …`, and whether collisions are possible."""
    rule = _integer_rule(key_types)
    if rule is not None:
        return rule.hi_sql, rule.lo_sql, False
    enc = _encoding(key_types)
    return f"md5_number_upper({enc})", f"md5_number_lower({enc})", True


def _encoding(key_types: list[str]) -> str:
    """SQL of the module docstring's encoding `enc` of the internal key columns `_dp_k0, …`."""
    pieces = []
    for i, t in enumerate(key_types):
        s = f"hex(_dp_k{i})" if t.upper() == "BLOB" else f"CAST(_dp_k{i} AS VARCHAR)"
        pieces.append(f"strlen({s})::VARCHAR, ':', {s}")
    return f"concat({', '.join(pieces)})"


def second_id_sql(key_types: list[str]) -> str:
    """SQL of a key's second id candidate over the internal key columns `_dp_k0, …`: the upper half of the
    digest counter (a UBIGINT, another function of the key than `key_id_sql`'s hash), the id of keys whose
    hash another key shares (module docstring, "Key ids"); injective only where checked."""
    return f"md5_number_upper({_encoding(key_types)})"


def counter_arrays(key_types: list[str]) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None:
    """For one integer key column of at most 64 bits, the function from its values (as numpy gives
    them) to (hi, lo): the numbers `counter_sql` computes, bit for bit, without two more columns
    through Arrow (the noise stage computes them per batch). None for every other key."""
    rule = _integer_rule(key_types)
    return None if rule is None else rule.arrays
