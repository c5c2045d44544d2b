"""Exact sampling of the discrete Gaussian on the integers from a PRF bit stream (exact integer arithmetic).

Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
(arXiv:2004.00010): Bernoulli(exp(−γ)) by von Neumann's method (§5.1, Alg. 1, with γ > 1 split
into ⌊γ⌋ factors exp(−1)), the discrete Laplace (§5.2, Alg. 2) and the discrete Gaussian by
rejection from it (§5.3, Alg. 3). Every decision compares a uniform integer with an exact rational
(σ is a double, hence an exact rational P/Q), so the output distribution is exactly N_Z(0, σ²):
P[Y = y] ∝ exp(−y²/(2σ²)) on ℤ — no floating point touches it, which is what removes the
Mironov (2012) leak of float noise (reachable outputs depending on the true count).

Privacy: adding N_Z(0, σ²) to an integer query of sensitivity Δ is ½(Δ/σ)²-zCDP (CKS20, arXiv:2004.00010 Prop. 4),
the same bound as the continuous Gaussian, so the charge 1/(2σ²) of a count is unchanged.

Bits. The sampler reads the same bits, in the same order, with the same outcomes as CKS20's algorithms
written on `fractions.Fraction` (that version is kept as the test oracle, tests/reference_discrete.py,
and tests/test_discrete.py checks equality draw by draw), so seeded releases are unchanged; it works
on integer numerators and denominators reduced exactly as Fraction reduces them (a Bernoulli(n/d)
reads `below(d)`, so the reduced denominator fixes how many bits are read).

Keyed arrays (`discrete_gaussian_array`): key j's draw reads its own bit stream, block i of which is
AES_{K_i}(hi_j ‖ lo_j), its 128-bit counter under the block's sub-key K_i = K[b"blck", 0, i] (prf.PRFKey.derive):
PRF values at distinct (sub-key, input) pairs, as every other noise of a release (prf.noise), so each draw is a
function of (K, counter) only: independent across keys and measures (distinct K), and unchanged by which other
keys are present or their order. Every key's first `_PREFILL` blocks are one batch of AES per block index (one
cipher for all keys), so a draw costs no cipher set-up of its own (the former stream, AES under a per-key sub-key,
spent ~6 µs a key there: the same sampler, 1.7–2.1× the draws per CPU second, benchmarks/RESULTS.md stop 39).

Why our own sampler: OpenDP's exact samplers draw from the OS CSPRNG and cannot be seeded, so
`seed=` releases would not reproduce; this one reads its bits from duckdp's AES PRF (prf.BitStream).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from .prf import _ECB, BitStream, PRFKey, _u64


class DiscreteGaussian:
    """Exact N_Z(0, σ²) draws for one σ > 0 (a double): CKS20 Alg. 3 on integers.

    With σ = P/Q (Fraction(σ), lowest terms) and t = ⌊σ⌋ + 1, the acceptance exponent of a
    discrete Laplace draw y is (|y| − σ²/t)²/(2σ²) = A²/(2P²Q²t²) with A = |y|·Q²·t − P², taken in
    lowest terms (divided by gcd(A², 2P²Q²t²)); and (n/d)/k in lowest terms is (n/g)/(d·k/g) with
    g = gcd(n, k), because gcd(n, d) = 1 (0/d is 0/1: g = k).
    """

    __slots__ = ("t", "_lt", "_c1", "_c2", "_d0")

    def __init__(self, sigma: float):
        if not (sigma > 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
        exact = Fraction(sigma)                  # σ as the exact rational P/Q (a double's, or an int's)
        p, q = exact.numerator, exact.denominator
        self.t = math.floor(sigma) + 1
        self._lt = (self.t - 1).bit_length()                 # bits of one try of below(t)
        self._c1, self._c2 = q * q * self.t, p * p
        self._d0 = 2 * p * p * q * q * self.t * self.t

    def draw(self, read: Callable[[int], int]) -> int:
        """One draw; `read(k)` returns k fresh uniform bits as an int (e.g. BitStream.bits)."""
        gcd = math.gcd
        t, lt, c1, c2, d0 = self.t, self._lt, self._c1, self._c2, self._d0

        def exp_minus_one() -> bool:              # Bernoulli(exp(−1)): Bernoulli(1/k) for k = 2, 3, … (Alg. 1)
            k = 2
            while True:
                bits = (k - 1).bit_length()       # below(k) < 1 ⇔ the accepted try is 0
                x = read(bits)
                while x >= k:
                    x = read(bits)
                if x:
                    return k % 2 == 1
                k += 1

        def bernoulli_exp(n: int, d: int) -> bool:    # Bernoulli(exp(−n/d)), n/d ≥ 0 in lowest terms (Alg. 1)
            while n > d:
                if not exp_minus_one():
                    return False
                n -= d                            # gcd(n − d, d) = gcd(n, d) = 1: still lowest terms
            k = 1
            while True:                           # Bernoulli((n/d)/k) = [below(D) < N], N/D its lowest terms
                g = gcd(n, k)
                big, small = d * k // g, n // g
                bits = (big - 1).bit_length()
                if bits:
                    x = read(bits)
                    while x >= big:
                        x = read(bits)
                    if x >= small:
                        return k % 2 == 1
                elif small == 0:                  # D = 1: below(1) = 0 reads nothing
                    return k % 2 == 1
                k += 1

        while True:
            while True:                           # discrete Laplace of scale t (Alg. 2)
                u = read(lt) if lt else 0
                if u >= t:
                    continue
                g = gcd(u, t)
                if not bernoulli_exp(u // g, t // g):
                    continue
                v = 0
                while exp_minus_one():
                    v += 1
                y = u + t * v
                negative = read(1) == 1
                if not (negative and y == 0):
                    break
            a = y * c1 - c2                       # accept with probability exp(−A²/(2P²Q²t²)) (Alg. 3)
            n = a * a
            g = gcd(n, d0)
            if bernoulli_exp(n // g, d0 // g):
                return -y if negative else y


def discrete_gaussian(bits: BitStream, sigma: float) -> int:
    """Y ~ N_Z(0, σ²) exactly, σ > 0 a double (CKS20 Alg. 3: t = ⌊σ⌋ + 1, accept a discrete Laplace
    draw Y with probability exp(−(|Y| − σ²/t)²/(2σ²))), from the bits of `bits`."""
    return DiscreteGaussian(sigma).draw(bits.bits)


_PREFILL = 4          # blocks of each key's stream drawn up front: a typical exact draw reads < 512 bits


class KeyedStreams:
    """The bit streams of many keys (see above): block i of key j is AES_{K_i}(counter j), the first `_PREFILL`
    blocks of every key computed at once; `reader(j)` is key j's `read(k)` for `DiscreteGaussian.draw`."""

    __slots__ = ("_key", "_counters", "_first", "_ciphers")

    def __init__(self, key: PRFKey, counters: bytes):
        self._key, self._counters = key, counters
        self._ciphers: dict[int, Any] = {}
        blocks = [np.frombuffer(self._cipher(i).update(counters), np.uint8).reshape(-1, 16) for i in range(_PREFILL)]
        self._first = np.concatenate(blocks, axis=1).tobytes() if blocks[0].size else b""

    def _cipher(self, i: int) -> Any:
        """The AES-ECB encryptor of block index i's sub-key K_i (one per call, shared by every key)."""
        enc = self._ciphers.get(i)
        if enc is None:
            enc = self._ciphers[i] = Cipher(algorithms.AES(self._key.derive(b"blck", 0, i).key), _ECB).encryptor()
        return enc

    def reader(self, j: int) -> Callable[[int], int]:
        """Key j's bits, most significant first, block after block: `read(k)` gives the next k as an int."""
        width = 16 * _PREFILL
        counter = self._counters[16 * j:16 * j + 16]
        state = [int.from_bytes(self._first[width * j:width * j + width], "big"), 8 * width, _PREFILL]
        cipher = self._cipher

        def read(k: int) -> int:
            buf, nbits, block = state
            while nbits < k:
                buf = (buf << 128) | int.from_bytes(cipher(block).update(counter), "big")
                nbits += 128
                block += 1
            nbits -= k
            state[0], state[1], state[2] = buf & ((1 << nbits) - 1), nbits, block
            return buf >> nbits

        return read


def discrete_gaussian_array(key: PRFKey, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike,
                            sigma: float) -> np.ndarray:
    """One exact N_Z(0, σ²) draw per 128-bit counter (int64 or uint64), each from its own stream (see above): draw j
    is `DiscreteGaussian(σ).draw` reading blocks AES_{K[b"blck", 0, i]}(hi_j ‖ lo_j), i = 0, 1, …. The loop runs per
    key in Python (~9·10⁴ draws per CPU second at σ ≈ 40, benchmarks/bench_discrete.py), for per-key metrics.
    """
    hi, lo = _u64(counters_hi), _u64(counters_lo)
    if hi.shape != lo.shape or hi.ndim != 1:
        raise ValueError("counters_hi and counters_lo must be 1-d arrays of the same length")
    sampler = DiscreteGaussian(sigma)
    blocks = np.empty((hi.size, 2), dtype=">u8")
    blocks[:, 0], blocks[:, 1] = hi, lo
    streams = KeyedStreams(key, blocks.tobytes())
    draws = (sampler.draw(streams.reader(j)) for j in range(hi.size))
    return np.fromiter(draws, dtype=np.int64, count=hi.size)
