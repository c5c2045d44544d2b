"""The keyed pseudorandom function behind every random choice of a release (numpy only, engine-neutral).

Construction. A release draws a 128-bit master key K from `os.urandom(16)` (or, with `seed=`,
K = first 16 bytes of SHA-256("duckdp/prf/v1" ‖ seed as signed 16-byte big-endian): reproducible,
for tests and demos only). Every purpose gets its own sub-key
    K[purpose, index, rank] = AES-128_K(purpose (4 ASCII bytes) ‖ index (4 bytes BE) ‖ rank (8 bytes BE)),
e.g. noise round i uses K[b"nois", i, 0] (and K[b"nois", i, r] for collision rank r > 0, see
duckdp/counters.py), SQL salts K[b"salt", 0, 0], the count-release bit stream K[b"dgau", 0, 0],
the per-key discrete Gaussians of aggregate measure t K[b"aggm", t, r] (`discrete.discrete_gaussian_array`:
block i of a key's bit stream under K[b"aggm", t, r][b"blck", 0, i]).
The noise of a key in a round is
    x = AES-128_sub(hi ‖ lo)   (hi, lo: the key's 128-bit counter as two big-endian uint64),
    v = first 8 bytes of x as a big-endian uint64,  m = ⌊v / 2¹²⌋ (its top 52 bits),
    u = (2m + 1) · 2⁻⁵³ ∈ [2⁻⁵³, 1 − 2⁻⁵³],
and N(0,1), Lap(0,1) and Gumbel(0,1) draws are Φ⁻¹(u), −sign(u−½)·log(1−2|u−½|) and −log(−log u).
The numerator 2m + 1 ≤ 2⁵³ − 1 is an exact double and the scaling by 2⁻⁵³ is exact, so u is the
midpoint of the m-th of 2⁵² equal cells of (0, 1), never 0 or 1 (every draw is finite: |Gaussian| ≤
8.21, |Laplace| ≤ 36.05, Gumbel in [−3.61, 36.74]), and the grid is symmetric: u(¬v) = 1 − u(v)
exactly, so the Gaussian and Laplace draws of ¬v are exactly the negated draws of v.
Sub-keys are AES outputs on distinct blocks, hence distinct-input PRF values under K.

Assumption: AES-128 is a pseudorandom function (permutation). Then, for any data-independent key K,
the values on *distinct* inputs are computationally indistinguishable from independent uniform
draws, so distinct (sub-key, block) pairs give i.i.d. noise (a PRP on ≤ 2⁶⁴ queries is a PRF up to
the birthday term q²/2¹²⁹). The grid of u moves any threshold probability P(u ≥ c) by at most half a
cell, 2⁻⁵³ (plus float error in Φ⁻¹ and in weight + σ·z, of the same order); what that costs in δ, and
the δ floor it implies, is in duckdp/privacy/budget.py (MIN_DELTA). Released *numbers* are never
built from u (count release uses duckdp.discrete instead).

Speed: cryptography's AES-ECB (AES-NI) holds the GIL, scipy/numpy ufuncs release it, so `noise`
works in chunks on a thread pool: one chunk's AES overlaps another chunk's Φ⁻¹. Large fresh arrays
cost page faults (~2.4 µs a 4 KiB page on the 2-core VM, as much as AES on 1,000 blocks), so `noise`
draws in steps of _STEP counters, each with AES into one buffer (`update_into`; `update` allocating
its result cost ~24 ns a block, measured) and u and Φ⁻¹(u) computed in place: ~20 ns a key, was ~53.
"""
from __future__ import annotations

import hashlib
import numbers
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

KINDS = ("gaussian", "laplace", "gumbel", "uniform")
_CHUNK = 1 << 20                     # counters per thread-pool task
_SEED_TAG = b"duckdp/prf/v1"
_REFILL = 4                          # AES blocks per BitStream refill (a typical exact draw reads < 512 bits)
_ECB = modes.ECB()
_STEP = 1 << 15                      # counters per `_draw` call: its arrays stay small enough for malloc to reuse
_FIRST = b"".join(i.to_bytes(16, "big") for i in range(_REFILL))      # counters of a stream's first refill


def _aes(key: bytes, data: bytes) -> bytes:
    """AES-128 of each 16-byte block of `data` under `key` (ECB = the block cipher applied blockwise)."""
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(data) + enc.finalize()


class PRFKey:
    """A 128-bit AES key; `derive` gives the sub-key of a purpose, `seeded` says where it came from."""

    __slots__ = ("key", "seeded")

    def __init__(self, key: bytes, seeded: bool = False):
        if not isinstance(key, bytes) or len(key) != 16:
            raise ValueError("a PRF key is 16 bytes")
        self.key, self.seeded = key, seeded

    @classmethod
    def fresh(cls) -> PRFKey:
        return cls(os.urandom(16))

    @classmethod
    def from_seed(cls, seed: int) -> PRFKey:
        """Deterministic key for `seed` (any Python int in [−2¹²⁷, 2¹²⁷)): SHA-256 of a domain tag and the seed."""
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed must be an integer, got {seed!r}")
        data = int(seed).to_bytes(16, "big", signed=True)
        return cls(hashlib.sha256(_SEED_TAG + data).digest()[:16], seeded=True)

    def derive(self, purpose: bytes, index: int, rank: int = 0) -> PRFKey:
        """K[purpose, index, rank] = AES_K(purpose ‖ index ‖ rank): one independent key per purpose."""
        if len(purpose) != 4 or not (0 <= index < 2**32) or not (0 <= rank < 2**64):
            raise ValueError(f"bad sub-key label {purpose!r}, {index}, {rank}")
        block = purpose + index.to_bytes(4, "big") + rank.to_bytes(8, "big")
        return PRFKey(_aes(self.key, block), self.seeded)

    def words(self, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike) -> np.ndarray:
        """First 64 bits (big-endian uint64) of AES_K(hi ‖ lo) for each counter pair."""
        hi, lo = _u64(counters_hi), _u64(counters_lo)
        blocks = np.empty((hi.size, 2), dtype=">u8")
        blocks[:, 0], blocks[:, 1] = hi, lo
        cipher = np.empty(blocks.nbytes + 15, np.uint8)     # update_into asks for one block − 1 byte of room
        enc = Cipher(algorithms.AES(self.key), _ECB).encryptor()
        written = enc.update_into(blocks.view(np.uint8).reshape(-1).data, cipher.data)
        enc.finalize()
        return cipher[:written].view(">u8")[::2].astype(np.uint64)


def uniform_from_words(v: np.ndarray) -> np.ndarray:
    """u = (2⌊v/2¹²⌋ + 1)·2⁻⁵³ ∈ [2⁻⁵³, 1 − 2⁻⁵³]: the top 52 bits of v as the midpoint of one of 2⁵²
    equal cells of (0, 1). Every step is exact (integer numerator < 2⁵³, power-of-two scale), so u is
    never 0 or 1, and u(¬v) = 1 − u(v) exactly (a symmetric grid)."""
    return _uniform_overwriting(np.array(v, dtype=np.uint64))


def _uniform_overwriting(v: np.ndarray) -> np.ndarray:
    """`uniform_from_words` of a uint64 array that it may overwrite (no temporaries but u)."""
    v >>= np.uint64(12)
    v <<= np.uint64(1)
    v |= np.uint64(1)
    u = v.astype(np.float64)
    u *= 2.0**-53
    return u


def standard(kind: str, u: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """A standard `kind` draw from uniforms u by inversion; `overwrite`: u may hold the result (Gaussian: in place)."""
    if kind == "gaussian":
        # imported here, not with the module: a Spark worker that draws no Gaussian never loads scipy
        from scipy.special import ndtri

        return ndtri(u, out=u) if overwrite else ndtri(u)
    if kind == "laplace":
        v = u - 0.5
        return -np.sign(v) * np.log1p(-2.0 * np.abs(v))
    if kind == "gumbel":
        return -np.log(-np.log(u))
    if kind == "uniform":
        return u
    raise ValueError(f"unknown noise kind {kind!r}; one of {KINDS}")


def _u64(x: npt.ArrayLike) -> np.ndarray:
    """64-bit integers reinterpreted as uint64 (two's complement for int64); smaller ints widened."""
    a = np.ascontiguousarray(x)
    if a.dtype.kind in "iu" and a.dtype.itemsize == 8:
        return a.view(np.uint64)
    return a.astype(np.int64).view(np.uint64)


def _draw(kind: str, key: PRFKey, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """standard(kind, uniform_from_words(key.words(hi, lo))), the same values with fewer fresh arrays."""
    u = _uniform_overwriting(key.words(hi, lo))        # `words` returns a new array
    return standard(kind, u, overwrite=True)


def noise(kind: str, key: PRFKey, round_tag: int, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike,
          ranks: npt.ArrayLike | None = None,
          threads: int | None = None) -> np.ndarray:
    """Standard `kind` noise for each key of round `round_tag`: a function of (K, round, counter, rank) only.

    `counters_hi/lo` are the keys' 128-bit counters (uint64 or int64 arrays, reinterpreted as
    unsigned; see duckdp/counters.py), `ranks` (optional int array, default all 0) the collision
    rank of each key among keys with the same counter. Row j uses sub-key K[b"nois", round_tag,
    ranks[j]], so distinct (counter, rank) pairs get independent noise. The result does not depend
    on `threads` or on the order of the rows.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown noise kind {kind!r}; one of {KINDS}")
    hi, lo = _u64(counters_hi), _u64(counters_lo)
    n = hi.size
    out = np.empty(n, dtype=np.float64)
    base = key.derive(b"nois", round_tag, 0)
    rank = np.empty(0, dtype=np.int64) if ranks is None else np.asarray(ranks, dtype=np.int64)
    colliding = np.flatnonzero(rank > 0)

    def fill(start: int) -> None:
        stop = min(start + _CHUNK, n)
        for s in range(start, stop, _STEP):
            e = min(s + _STEP, stop)
            out[s:e] = _draw(kind, base, hi[s:e], lo[s:e])

    starts = range(0, n, _CHUNK)
    workers = threads or min(len(starts), os.cpu_count() or 1)
    if workers <= 1 or len(starts) <= 1:
        for s in starts:
            fill(s)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, starts))
    for r in np.unique(rank[colliding]) if colliding.size else ():
        rows = colliding[rank[colliding] == r]
        out[rows] = _draw(kind, key.derive(b"nois", round_tag, int(r)), hi[rows], lo[rows])
    return out


class BitStream:
    """Uniform random bits from AES_sub(0), AES_sub(1), … (counter mode, each 128-bit block read
    big-endian, most significant bit first), for exact samplers: `bits(k)` gives k fresh bits as a
    non-negative int. One encryptor per stream, refilled `_REFILL` blocks at a time (the bits do not
    depend on the refill size); `bits` is a closure over the buffer, the samplers' hot path."""

    __slots__ = ("bits",)
    bits: Callable[[int], int]

    def __init__(self, key: PRFKey):
        enc = Cipher(algorithms.AES(key.key), _ECB).encryptor()
        buf = nbits = block = 0           # `nbits` buffered bits in `buf`; next block index

        def bits(k: int) -> int:
            nonlocal buf, nbits, block
            while nbits < k:
                counters = _FIRST if block == 0 else b"".join((block + i).to_bytes(16, "big") for i in range(_REFILL))
                block += _REFILL
                buf = (buf << 128 * _REFILL) | int.from_bytes(enc.update(counters), "big")
                nbits += 128 * _REFILL
            nbits -= k
            out = buf >> nbits
            buf &= (1 << nbits) - 1
            return out

        self.bits = bits
