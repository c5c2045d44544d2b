"""Test oracle: the exact CKS20 discrete Gaussian on `fractions.Fraction` and the AES bit streams, written plainly
(duckdp/discrete.py is the integer sampler, prefilled keyed streams). The library must give the same bits and the
same draws for the same key, counters and σ, so seeded releases stay bit-identical."""
from __future__ import annotations

import bisect
import math
from fractions import Fraction
from functools import cache

import numpy as np

from duckdp.prf import PRFKey, _aes, _u64


class ReferenceBitStream:
    """AES_sub(0), AES_sub(1), … in counter mode, each block big-endian, most significant bit first."""

    def __init__(self, key: PRFKey):
        self._key = key
        self._block = 0
        self._bits = 0
        self._nbits = 0

    def bits(self, k: int) -> int:
        while self._nbits < k:          # refill 32 blocks at a time
            counters = b"".join((self._block + i).to_bytes(16, "big") for i in range(32))
            self._block += 32
            self._bits = (self._bits << 4096) | int.from_bytes(_aes(self._key.key, counters), "big")
            self._nbits += 4096
        self._nbits -= k
        out = self._bits >> self._nbits
        self._bits &= (1 << self._nbits) - 1
        return out

    def below(self, n: int) -> int:
        k = (n - 1).bit_length()
        while True:
            x = self.bits(k) if k else 0
            if x < n:
                return x


def bernoulli(bits: ReferenceBitStream, p: Fraction) -> bool:
    return bits.below(p.denominator) < p.numerator


def bernoulli_exp(bits: ReferenceBitStream, gamma: Fraction) -> bool:
    """Bernoulli(exp(−γ)) (CKS20 Alg. 1)."""
    while gamma > 1:
        if not bernoulli_exp(bits, Fraction(1)):
            return False
        gamma -= 1
    k = 1
    while bernoulli(bits, gamma / k):
        k += 1
    return k % 2 == 1


def geometric(bits: ReferenceBitStream, t: int, s: int) -> int:
    """CKS20 Alg. 2 before its sign: ⌊X/s⌋ for X = U + t·V, P[X = x] ∝ exp(−x/t)."""
    while True:
        u = bits.below(t)
        if not bernoulli_exp(bits, Fraction(u, t)):
            continue
        v = 0
        while bernoulli_exp(bits, Fraction(1)):
            v += 1
        return (u + t * v) // s


def discrete_laplace(bits: ReferenceBitStream, t: int) -> int:
    """CKS20 Alg. 2 with s = 1."""
    while True:
        y = geometric(bits, t, 1)
        negative = bits.bits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(bits: ReferenceBitStream, sigma: float) -> int:
    """CKS20 Alg. 3."""
    var = Fraction(sigma) ** 2
    t = math.floor(sigma) + 1
    while True:
        y = discrete_laplace(bits, t)
        if bernoulli_exp(bits, (abs(y) - var / t) ** 2 / (2 * var)):
            return y


class ReferenceKeyStream(ReferenceBitStream):
    """Key j's stream of a keyed array: block i is AES_{K[b"blck", 0, i]}(counter j), one block at a time."""

    def __init__(self, key: PRFKey, counter: bytes):
        super().__init__(key)
        self._counter = counter

    def bits(self, k: int) -> int:
        while self._nbits < k:
            block = _aes(self._key.derive(b"blck", 0, self._block).key, self._counter)
            self._block += 1
            self._bits = (self._bits << 128) | int.from_bytes(block, "big")
            self._nbits += 128
        self._nbits -= k
        out = self._bits >> self._nbits
        self._bits &= (1 << self._nbits) - 1
        return out


def _streams(key: PRFKey, counters_hi: np.ndarray, counters_lo: np.ndarray) -> list[ReferenceKeyStream]:
    """Key j's stream: blocks AES_{K[b"blck", 0, i]}(hi_j ‖ lo_j), i = 0, 1, …."""
    return [ReferenceKeyStream(key, int(h).to_bytes(8, "big") + int(low).to_bytes(8, "big"))
            for h, low in zip(_u64(counters_hi), _u64(counters_lo), strict=True)]


def discrete_gaussian_array(key: PRFKey, counters_hi: np.ndarray, counters_lo: np.ndarray, sigma: float,
                            step: int = 64) -> np.ndarray:
    """Draw j from its own stream: by inversion where σ is in the library's inversion range
    (duckdp.discrete._inversion_range, a policy on σ alone), else CKS20 Alg. 3."""
    from duckdp.discrete import _inversion_range
    top = _inversion_range(sigma)
    draw = (lambda bits: discrete_gaussian(bits, sigma)) if top is None else (
        lambda bits: inversion(bits, sigma, top, step))
    return np.array([draw(bits) for bits in _streams(key, counters_hi, counters_lo)], dtype=np.int64)


# ---------------------------------------------------------------- thresholded draws, written plainly

def _theta(var):
    """Σ_z exp(−z²/(2σ²)) = θ₃(0, e^{−1/(2σ²)}), or for σ > 1 by Poisson summation σ√(2π)·θ₃(0, e^{−2π²σ²}) (mpmath's
    θ₃ refuses q near 1), at mpmath's working precision."""
    import mpmath
    if var <= 1:
        return mpmath.jtheta(3, 0, mpmath.exp(-1 / (2 * var)))
    return mpmath.sqrt(2 * mpmath.pi * var) * mpmath.jtheta(3, 0, mpmath.exp(-2 * mpmath.pi ** 2 * var))


def tail_probability(sigma: float, m: int, bits: int = 600):
    """P[Z ≥ m] for Z ~ N_Z(0, σ²) at `bits` bits of precision (mpmath): the normaliser from Jacobi's θ₃ (`_theta`),
    the tail by summing far past where its terms matter (a different method from duckdp/discrete_tail.py's)."""
    import mpmath
    with mpmath.workprec(bits):
        var = mpmath.mpf(Fraction(sigma).numerator) ** 2 / mpmath.mpf(Fraction(sigma).denominator) ** 2
        total = _theta(var)
        stop = m + int(math.sqrt(2 * float(var) * bits * math.log(2))) + 10
        tail = mpmath.fsum(mpmath.exp(-mpmath.mpf(z) ** 2 / (2 * var)) for z in range(m, stop + 1))
        return tail / total


@cache
def tail_probabilities(sigma: float, m_max: int, bits: int) -> tuple:
    """P[Z ≥ m] for m = 1 … m_max at `bits` bits (mpmath): the normaliser from Jacobi's θ₃, the tails by one
    backward sum far past where its terms matter."""
    import mpmath
    with mpmath.workprec(bits):
        var = mpmath.mpf(Fraction(sigma).numerator) ** 2 / mpmath.mpf(Fraction(sigma).denominator) ** 2
        total = _theta(var)
        stop = m_max + int(math.sqrt(2 * float(var) * bits * math.log(2))) + 10
        tails, s = [], mpmath.mpf(0)
        for z in range(stop, 0, -1):
            s += mpmath.exp(-mpmath.mpf(z) ** 2 / (2 * var))
            if z <= m_max:
                tails.append(s / total)
        return tuple(reversed(tails))


def tail_digits(sigma: float, m: int, bits: int, m_max: int | None = None) -> int:
    """⌊P[Z ≥ m]·2^bits⌋, checked to lie well inside its step (`m_max`: share the sum of a larger table)."""
    import mpmath
    with mpmath.workprec(bits + 300):
        scaled = tail_probabilities(sigma, m_max or m, bits + 300)[m - 1] * mpmath.mpf(2) ** bits
        floor = int(mpmath.floor(scaled))
        assert scaled * mpmath.mpf(2) ** -250 < scaled - floor < 1 - mpmath.mpf(2) ** -200
        return floor


def inversion(bits: ReferenceBitStream, sigma: float, top: int, step: int = 64) -> int:
    """Z = max{z : U < S(z)}, S(z) = P[Z ≥ z] (p_z for z ≥ 1, 1 − p_{1−z} for z ≤ 0), comparing U's digits, `step`
    bits at a time, with S's from z = top down (a comparison reads more of U only where the digits tie); Z ≥ top
    and Z ≤ −top drawn as `at_least(top)` and its mirror from the bits that follow."""
    u, width = bits.bits(step), step
    start = bisect.bisect_left(survival_digits(sigma, top, step), u)   # z above: digits < u, so U ≥ S(z), no read
    for z in range(top - start, -top, -1):
        while u == survival_digit(sigma, top, z, width):
            u, width = (u << step) | bits.bits(step), width + step
        if u < survival_digit(sigma, top, z, width):
            return at_least(bits, sigma, top) if z == top else z
    return -at_least(bits, sigma, top)


def survival_digit(sigma: float, top: int, z: int, width: int) -> int:
    """S(z)'s first `width` digits: p_z's, or those of 1 − p_{1−z} (2^width − 1 − p's) for z ≤ 0."""
    p = tail_digits(sigma, z if z >= 1 else 1 - z, width, top)
    return p if z >= 1 else (1 << width) - 1 - p


@cache
def survival_digits(sigma: float, top: int, step: int) -> list[int]:
    """S(z)'s first `step` digits for z = top, top − 1, …, 1 − top (non-decreasing)."""
    return [survival_digit(sigma, top, z, step) for z in range(top, -top, -1)]


def at_least(bits: ReferenceBitStream, sigma: float, m: int) -> int:
    """Z ~ N_Z(0, σ²) given Z ≥ m ≥ 1: Z = m + W, W with P ∝ exp(−W/τ) (CKS20 Alg. 2, scale τ = a/b), kept with
    probability exp(−(Z − σ²/τ)²/(2σ²)); τ = ⌊σ⌋ + 1 where m·τ ≤ σ², else σ²/m."""
    var = Fraction(sigma) ** 2
    t = math.floor(sigma) + 1
    tau = Fraction(t) if m * t <= var else var / m
    while True:
        z = m + geometric(bits, tau.numerator, tau.denominator)
        if bernoulli_exp(bits, (z - var / tau) ** 2 / (2 * var)):
            return z


def thresholded_array(key: PRFKey, counters_hi: np.ndarray, counters_lo: np.ndarray, sigma: float,
                      floors: np.ndarray, step: int = 64) -> np.ndarray:
    """Per key: m ≤ 0 → a full draw z (z, or m − 1 where z < m); m ≥ 1 → B = [U < P[Z ≥ m]] comparing `step` bits of
    U at a time with P's digits, then Z | Z ≥ m where B (else m − 1)."""
    out = []
    for h, low, m in zip(_u64(counters_hi), _u64(counters_lo), np.asarray(floors).tolist(), strict=True):
        bits = ReferenceKeyStream(key, int(h).to_bytes(8, "big") + int(low).to_bytes(8, "big"))
        if m <= 0:
            z = discrete_gaussian_array(key, np.array([h]), np.array([low]), sigma, step)[0]
            out.append(int(z) if z >= m else m - 1)
            continue
        u, level = 0, 0
        while True:
            level += 1
            u = (u << step) | bits.bits(step)
            digits = tail_digits(sigma, m, level * step)
            if u != digits:
                break
        out.append(at_least(bits, sigma, m) if u < digits else m - 1)
    return np.array(out, dtype=np.int64)
