"""Randomness: a secret (or seeded) key and counter-based noise keyed by item hashes.

DuckDB evaluates UDFs on parallel threads in no fixed order, so noise drawn from a sequential
generator would make seeded runs irreproducible. Instead each noise value is a function of a
secret key and a 64-bit per-row counter (a keyed hash of the item computed in SQL, salted per
round): fresh and independent per item, identical for the same seed. The key comes from
`os.urandom` unless a seed is given. The generator is statistically strong (SplitMix64 finaliser,
two keyed rounds), not a cryptographic PRF, like numpy's own generators.
"""
from __future__ import annotations

import os

import numpy as np
from scipy.special import ndtri

from .validation import seed as check_seed

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijective avalanche on uint64
    (numpy's uint64 arithmetic wraps modulo 2⁶⁴, as the finaliser needs)."""
    x = x + _GOLDEN
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


class Randomness:
    """The randomness of one release: keyed noise plus salts for hashing in SQL."""

    def __init__(self, seed: int | None = None):
        seed = check_seed(seed)
        self.seeded = seed is not None
        entropy = int.from_bytes(os.urandom(32), "little") if seed is None else seed
        self.generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
        self._k1, self._k2 = (np.uint64(v) for v in self.generator.integers(0, 2**64, 2, dtype=np.uint64))

    def salt(self) -> int:
        """A fresh 63-bit salt for a keyed SQL hash (truncation order, per-round noise counters).

        Use it as `hash(xor(hash(cols...), $salt))`: DuckDB's multi-argument hash combines by a
        cheap xor, so `hash(cols..., $salt)` would only xor-permute the order, not re-randomise it.
        """
        return int(self.generator.integers(0, 2**63 - 1))

    def uniform(self, counters: np.ndarray) -> np.ndarray:
        """U(0, 1) (open interval) for each uint64 counter."""
        c = np.asarray(counters, dtype=np.uint64)
        x = _mix(_mix(c ^ self._k1) ^ self._k2)
        return ((x >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / 2**53)

    def gaussian(self, counters: np.ndarray) -> np.ndarray:
        """N(0, 1) by inversion of the uniform."""
        return ndtri(self.uniform(counters))

    def laplace(self, counters: np.ndarray) -> np.ndarray:
        """Lap(0, 1) by inversion: −sign(u−½)·log(1−2|u−½|)."""
        v = self.uniform(counters) - 0.5
        return -np.sign(v) * np.log1p(-2 * np.abs(v))

    def gumbel(self, counters: np.ndarray) -> np.ndarray:
        """Standard Gumbel by inversion: −log(−log u)."""
        return -np.log(-np.log(self.uniform(counters)))
