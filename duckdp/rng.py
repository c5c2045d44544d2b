"""Randomness of one release: a PRF key (fresh from os.urandom, or derived from `seed`), round tags,
salts for keyed SQL hashes and bit streams for exact samplers (construction: duckdp/prf.py).

Every random choice is a PRF value at a distinct input under this key, so the choices do not
depend on DuckDB's thread count or scan order, and `seed` reproduces a release exactly.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .prf import BitStream, PRFKey, noise
from .validation import seed as check_seed

_MASK63 = np.uint64(2**63 - 1)


class Randomness:
    """The PRF key of one release and counters handing out fresh round tags, salts and streams."""

    def __init__(self, seed: int | None = None):
        seed = check_seed(seed)
        self.key = PRFKey.fresh() if seed is None else PRFKey.from_seed(seed)
        self.seeded = seed is not None
        self._salts = self.key.derive(b"salt", 0)
        self._n_salts = 0
        self._n_rounds = 0
        self._n_streams = 0

    def next_round(self) -> int:
        """A fresh round tag: noise of round t uses sub-keys K[b"nois", t, rank] (duckdp/prf.py)."""
        self._n_rounds += 1
        return self._n_rounds - 1

    def noise(self, kind: str, round_tag: int, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike,
              ranks: npt.ArrayLike | None = None,
              threads: int | None = None) -> np.ndarray:
        """Standard `kind` noise of round `round_tag` for each key counter (duckdp.prf.noise)."""
        return noise(kind, self.key, round_tag, counters_hi, counters_lo, ranks, threads)

    def salt(self) -> int:
        """A fresh 63-bit salt (AES under K[b"salt", 0, 0] of the salt's index) for a keyed SQL hash.

        Use it as `hash(xor(hash(cols...), $salt))`: DuckDB's multi-argument hash combines by a
        cheap xor, so `hash(cols..., $salt)` would only xor-permute the order, not re-randomise it.
        Such hashes only order rows (truncation, ties), never key noise. A stage that must order rows as a
        truncation will (adaptive SIPS's lazy noise) is handed that truncation's salt by the mechanism.
        """
        word = self._salts.words(np.zeros(1, np.uint64), np.array([self._n_salts], np.uint64))[0]
        self._n_salts += 1
        return int(word & _MASK63)

    def stream(self) -> BitStream:
        """A fresh stream of uniform bits (AES counter mode under K[b"bits", i, 0])."""
        self._n_streams += 1
        return BitStream(self.key.derive(b"bits", self._n_streams - 1))
