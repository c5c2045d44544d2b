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
Where σ is at most a few thousand (counts and user counts: not sums, whose σ is ~10⁶ grid steps) a keyed array is
drawn by inversion instead ("Draws by inversion" below): exactly N_Z(0, σ²) again, one AES block and one
searchsorted per key, 4–8·10⁶ draws per CPU second (RESULTS.md stop 40); the comparisons against the tail's digits
and the tails' rejection sampler (`draw_at_least`) are exact as the rest.

Why our own sampler: OpenDP's exact samplers draw from the OS CSPRNG and cannot be seeded, so
`seed=` releases would not reproduce; this one reads its bits from duckdp's AES PRF (prf.BitStream).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from .discrete_tail import largest_tail, tail_bits, tail_table
from .prf import _ECB, BitStream, PRFKey, _u64


def _exp_minus_one(read: Callable[[int], int]) -> bool:
    """Bernoulli(exp(−1)): Bernoulli(1/k) for k = 2, 3, … (CKS20 Alg. 1)."""
    k = 2
    while True:
        bits = (k - 1).bit_length()       # below(k) < 1 ⇔ the accepted try is 0
        x = read(bits)
        while x >= k:
            x = read(bits)
        if x:
            return k % 2 == 1
        k += 1


def _bernoulli_exp(read: Callable[[int], int], n: int, d: int) -> bool:
    """Bernoulli(exp(−n/d)), n/d ≥ 0 in lowest terms (CKS20 Alg. 1, ⌊n/d⌋ factors exp(−1) first)."""
    while n > d:
        if not _exp_minus_one(read):
            return False
        n -= d                            # gcd(n − d, d) = gcd(n, d) = 1: still lowest terms
    k = 1
    gcd = math.gcd
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


def _geometric(read: Callable[[int], int], a: int, b: int) -> int:
    """W ≥ 0 with P[W = w] ∝ exp(−w·b/a) (CKS20 Alg. 2 with t = a, s = b, before its sign): X = U + a·V with
    U uniform on {0, …, a − 1} kept with probability exp(−U/a) and V counting exp(−1) successes, W = ⌊X/b⌋."""
    lt = (a - 1).bit_length()                 # bits of one try of below(a)
    while True:
        u = read(lt) if lt else 0
        if u >= a:
            continue
        g = math.gcd(u, a)
        if not _bernoulli_exp(read, u // g, a // g):
            continue
        v = 0
        while _exp_minus_one(read):
            v += 1
        return (u + a * v) // b


class DiscreteGaussian:
    """Exact N_Z(0, σ²) draws for one σ > 0 (a double): CKS20 Alg. 3 on integers, and its upper tails.

    With σ = P/Q (Fraction(σ), lowest terms) and t = ⌊σ⌋ + 1, the acceptance exponent of a
    discrete Laplace draw y is (|y| − σ²/t)²/(2σ²) = A²/(2P²Q²t²) with A = |y|·Q²·t − P², taken in
    lowest terms (divided by gcd(A², 2P²Q²t²)); and (n/d)/k in lowest terms is (n/g)/(d·k/g) with
    g = gcd(n, k), because gcd(n, d) = 1 (0/d is 0/1: g = k).
    """

    __slots__ = ("t", "_p2", "_q2", "_c1", "_d0")

    def __init__(self, sigma: float):
        if not (sigma > 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
        exact = Fraction(sigma)                  # σ as the exact rational P/Q (a double's, or an int's)
        p, q = exact.numerator, exact.denominator
        self.t = math.floor(sigma) + 1
        self._p2, self._q2 = p * p, q * q
        self._c1 = q * q * self.t
        self._d0 = 2 * p * p * q * q * self.t * self.t

    def draw(self, read: Callable[[int], int]) -> int:
        """One draw; `read(k)` returns k fresh uniform bits as an int (e.g. BitStream.bits)."""
        gcd = math.gcd
        t, c1, c2, d0 = self.t, self._c1, self._p2, self._d0
        while True:
            while True:                           # discrete Laplace of scale t (Alg. 2)
                y = _geometric(read, t, 1)
                negative = read(1) == 1
                if not (negative and y == 0):
                    break
            a = y * c1 - c2                       # accept with probability exp(−A²/(2P²Q²t²)) (Alg. 3)
            n = a * a
            g = gcd(n, d0)
            if _bernoulli_exp(read, n // g, d0 // g):
                return -y if negative else y

    def draw_at_least(self, read: Callable[[int], int], m: int) -> int:
        """One draw of Z ~ N_Z(0, σ²) conditioned on Z ≥ m, for an integer m ≥ 1, by rejection (CKS20 Alg. 3's
        argument on the tail): propose Z = m + W, W geometric with P[W = w] ∝ exp(−w/τ), and accept with
        probability exp(−(Z − σ²/τ)²/(2σ²)) ≤ 1; the accepted Z has P ∝ exp(−Z/τ)·exp(−(Z − σ²/τ)²/(2σ²)) ∝
        exp(−Z²/(2σ²)) on Z ≥ m. τ = t where m·t ≤ σ² (the ratio's peak σ²/t ≥ m lies in the tail), else τ = σ²/m
        (peak at m): each try is accepted with probability ≳ 0.4. With τ = a/b the exponent is
        (Z·Q²·a − P²·b)²/(2P²Q²a²)."""
        p2, q2 = self._p2, self._q2
        if m * q2 * self.t <= p2:
            a, b = self.t, 1
        else:
            g = math.gcd(p2, q2 * m)
            a, b = p2 // g, q2 * m // g
        d = 2 * p2 * q2 * a * a
        while True:
            z = m + _geometric(read, a, b)
            n = (z * q2 * a - p2 * b) ** 2
            g = math.gcd(n, d)
            if _bernoulli_exp(read, n // g, d // g):
                return z


def discrete_gaussian(bits: BitStream, sigma: float) -> int:
    """Y ~ N_Z(0, σ²) exactly, σ > 0 a double (CKS20 Alg. 3: t = ⌊σ⌋ + 1, accept a discrete Laplace
    draw Y with probability exp(−(|Y| − σ²/t)²/(2σ²))), from the bits of `bits`."""
    return DiscreteGaussian(sigma).draw(bits.bits)


_PREFILL = 4          # blocks of each key's stream drawn up front: a typical exact draw reads < 512 bits


class KeyedStreams:
    """The bit streams of many keys (see above): block i of key j is AES_{K_i}(counter j), the first `_PREFILL`
    blocks of every key computed at once; `reader(j)` is key j's `read(k)` for `DiscreteGaussian.draw`."""

    __slots__ = ("_key", "_counters", "_first", "_ciphers", "_prefill")

    def __init__(self, key: PRFKey, counters: bytes, prefill: int = _PREFILL):
        self._key, self._counters, self._prefill = key, counters, prefill
        self._ciphers: dict[int, Any] = {}
        blocks = [np.frombuffer(self._cipher(i).update(counters), np.uint8).reshape(-1, 16) for i in range(prefill)]
        self._first = np.concatenate(blocks, axis=1).tobytes() if blocks[0].size else b""

    def heads(self) -> np.ndarray:
        """Every key's first 64 bits (the start of block 0), as uint64."""
        return np.frombuffer(self._first, dtype=">u8").reshape(-1, 2 * self._prefill)[:, 0].astype(np.uint64)

    def _cipher(self, i: int) -> Any:
        """The AES-ECB encryptor of block index i's sub-key K_i (one per call, shared by every key)."""
        enc = self._ciphers.get(i)
        if enc is None:
            enc = self._ciphers[i] = Cipher(algorithms.AES(self._key.derive(b"blck", 0, i).key), _ECB).encryptor()
        return enc

    def reader(self, j: int) -> Callable[[int], int]:
        """Key j's bits, most significant first, block after block: `read(k)` gives the next k as an int."""
        width = 16 * self._prefill
        counter = self._counters[16 * j:16 * j + 16]
        state = [int.from_bytes(self._first[width * j:width * j + width], "big"), 8 * width, self._prefill]
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


def _blocks(counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike) -> bytes:
    """The 128-bit counters hi_j ‖ lo_j (int64 or uint64 halves), big-endian, one after another."""
    hi, lo = _u64(counters_hi), _u64(counters_lo)
    if hi.shape != lo.shape or hi.ndim != 1:
        raise ValueError("counters_hi and counters_lo must be 1-d arrays of the same length")
    blocks = np.empty((hi.size, 2), dtype=">u8")
    blocks[:, 0], blocks[:, 1] = hi, lo
    return blocks.tobytes()


def discrete_gaussian_array(key: PRFKey, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike,
                            sigma: float) -> np.ndarray:
    """One exact N_Z(0, σ²) draw per 128-bit counter (int64 or uint64), each from its own stream (see above): draw j
    reads blocks AES_{K[b"blck", 0, i]}(hi_j ‖ lo_j), i = 0, 1, …. Where σ allows (`_inversion_range`: counts, user
    counts) by inversion of the survival function, vectorised (see "Draws by inversion" below); else
    `DiscreteGaussian(σ).draw` per key in Python (~1–1.5·10⁵ draws per CPU second, benchmarks/bench_discrete.py).
    """
    blocks = _blocks(counters_hi, counters_lo)
    sampler = DiscreteGaussian(sigma)
    n = len(blocks) // 16
    top = _inversion_range(sigma)
    if top is None:
        streams = KeyedStreams(key, blocks)
        return np.fromiter((sampler.draw(streams.reader(j)) for j in range(n)), dtype=np.int64, count=n)
    first = _survival(sigma, top)
    digits, known = _digit_arrays(first)
    heads = KeyedStreams(key, blocks, prefill=1).heads() >> np.uint64(64 - _STEP)
    descending = digits[::-1]                    # D(z) for z = top, top − 1, …, 1 − top: non-decreasing
    above = digits.size - np.searchsorted(descending, heads, side="right")      # #{z : D(z) > h}
    tied = np.searchsorted(descending, heads, side="right") != np.searchsorted(descending, heads, side="left")
    out = (above - top).astype(np.int64)         # the largest z with D(z) > h: U < S(z) and U ≥ S(z + 1)
    rest = np.flatnonzero(tied | (above == 0) | (above == digits.size) | ~known.all())
    if rest.size:
        mine = np.frombuffer(blocks, dtype=np.uint8).reshape(-1, 16)[rest].tobytes()
        streams = KeyedStreams(key, mine)
        for i, j in enumerate(rest.tolist()):
            out[j] = _invert(streams.reader(i), sampler, sigma, top, first)
    return out


# ---------------------------------------------------------------- draws by inversion (σ up to a few thousand)
#
# Z = max{z : U < S(z)}, S(z) = P[Z ≥ z], for U ∈ [0, 1) uniform: exactly N_Z(0, σ²) (P[Z = z] = S(z) − S(z + 1)).
# S(z) = p_z for z ≥ 1 and 1 − p_{1−z} for z ≤ 0 (symmetry), with p's digits from duckdp/discrete_tail.py: where
# L/2^b < p < (L + 1)/2^b, 1 − p lies strictly between (2^b − 1 − L)/2^b and (2^b − L)/2^b, so D(z), the first
# _STEP digits of S(z), decide U < S(z) from U's first _STEP bits h unless h = D(z). For |z| < top (top = ⌈8σ⌉ + 1)
# one searchsorted over D settles every key without a tie (all but ~2·top·2⁻⁶⁴ of them); the rest, and U beyond
# S(top) or S(1 − top) (probability ~2⁻⁴⁶), go through `_invert`: the comparisons from z = top down, U extended
# _STEP bits at a time where it ties (the same conventions as `_passes`), and the tails Z ≥ top and Z ≤ −top drawn
# as top + … by `draw_at_least` (and its mirror) from the bits that follow.


def _inversion_range(sigma: float) -> int | None:
    """top = ⌈8σ⌉ + 1 where p_1 … p_top's digits cost at most MAX_TERMS terms to sum (σ ≲ 4,900), else None."""
    top = math.ceil(8 * sigma) + 1
    return top if top <= largest_tail(sigma, _STEP) else None


def _survival(sigma: float, top: int) -> list[int | None]:
    """D(z) for z = 1 − top, …, top: S's first _STEP digits, non-increasing (None where not certified)."""
    tails = tail_table(sigma, top, _STEP)
    full = (1 << _STEP) - 1
    return [None if v is None else full - v for v in reversed(tails)] + list(tails)     # z = 1 − top … 0, 1 … top


def _digit_arrays(values: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
    """Digits as uint64 (0 where not certified) and which are certified, for vectorised compares."""
    return (np.array([0 if v is None else v for v in values], dtype=np.uint64),
            np.array([v is not None for v in values], dtype=bool))


def _survival_bits(sigma: float, z: int, bits: int) -> int | None:
    """S(z)'s first `bits` digits (None where p's cannot be certified)."""
    tail = tail_bits(sigma, z if z >= 1 else 1 - z, bits)
    return None if tail is None else tail if z >= 1 else (1 << bits) - 1 - tail


def _invert(read: Callable[[int], int], sampler: DiscreteGaussian, sigma: float, top: int,
            first: list[int | None]) -> int:
    """One draw by inversion, comparison by comparison (see above); `first`: D(z) for z = 1 − top … top."""
    u = _Uniform(read)
    for z in range(top, -top, -1):
        if u.below(first[z + top - 1], partial(_survival_bits, sigma, z)):      # U < S(z)?
            return sampler.draw_at_least(read, top) if z == top else z
    return -sampler.draw_at_least(read, top)


# ---------------------------------------------------------------- thresholded draws (keys="threshold")
#
# keys="threshold" needs, per candidate key with count c, only whether c + Z ≥ T and, where it is, Z: with
# m = T − c, the pair (passed, Z on passed) of `thresholded_array` has exactly the law of (Z ≥ m, Z on Z ≥ m) for
# one N_Z(0, σ²) draw Z. For m ≥ 1 (c below T: nearly every candidate) it is drawn as B ~ Bernoulli(p_m),
# p_m = P[Z ≥ m], then Z ~ (N_Z(0, σ²) | Z ≥ m) where B = 1 (`DiscreteGaussian.draw_at_least`): the same joint
# law, P[B = 1, Z = z] = p_m · P[Z = z]/p_m. B reads the key's stream _STEP bits at a time as the binary digits of
# a uniform U ∈ [0, 1) and compares them with p_m's (duckdp/discrete_tail.py, rigorous interval arithmetic):
# B = [U < p_m], decided at the first step whose digits differ — by the first 64 bits for all but 2^-64 of keys, so
# one AES block per key, compared in numpy, decides almost every candidate without a draw. After _MAX_STEPS equal
# steps, or where p_m's digits cannot be certified (within 2^-16000 of a dyadic), B = 0: the law differs from the
# exact one by less than 2^-4000 in total variation per key. For m ≤ 0 (c ≥ T), and m past `largest_tail` (tails too
# long to sum, large σ), Z is one full draw.
# Keys stay independent: key j's outcome is a function of its own stream and m_j (hence of (K, counter_j, c_j)).

_STEP = 64           # bits of U compared per step (tests shrink it to reach later steps)
_MAX_STEPS = 64


def _digit_table(sigma: float, m: np.ndarray) -> tuple[np.ndarray, tuple[int | None, ...]]:
    """Which keys are settled by p_m's digits (1 ≤ m ≤ `largest_tail(σ)`: σ ≳ 8,000 draws every key in full), and
    the first _STEP digits of p_1, p_2, … at least up to the largest such m here (a table for the next power of two,
    so the batches of one call, whose largest m differ, share a few tables)."""
    last = largest_tail(sigma, _STEP)
    use = (m >= 1) & (m <= last)
    if not use.any():
        return use, ()
    return use, tail_table(sigma, min(last, 1 << (int(m[use].max()) - 1).bit_length()), _STEP)


def decided_below(key: PRFKey, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike, sigma: float,
                  floors: npt.ArrayLike) -> np.ndarray:
    """Which keys' `thresholded_array` outcome is already "below" (B = 0, value floor − 1) from the first _STEP bits
    of their streams: one AES block per key and a vectorised compare, no draw."""
    return _decided(key, _blocks(counters_hi, counters_lo), sigma, np.asarray(floors, dtype=np.int64))[0]


def _decided(key: PRFKey, blocks: bytes, sigma: float, m: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                               tuple[int | None, ...]]:
    """`decided_below`'s mask, with `_digit_table`'s (which keys use the digits, the digits)."""
    use, table = _digit_table(sigma, m)
    out = np.zeros(m.size, dtype=bool)
    if not table:
        return out, use, table
    tail = np.flatnonzero(use)
    digits, known = _digit_arrays(table)
    idx = m[tail] - 1
    heads = KeyedStreams(key, blocks, prefill=1).heads()[tail] >> np.uint64(64 - _STEP)
    out[tail] = known[idx] & (heads > digits[idx])
    return out, use, table


class _Uniform:
    """A uniform U ∈ [0, 1) read lazily from a key's stream, _STEP bits at a time (the first step at once)."""

    __slots__ = ("read", "u", "step")

    def __init__(self, read: Callable[[int], int]):
        self.read, self.u, self.step = read, read(_STEP), 1

    def below(self, first: int | None, later: Callable[[int], int | None]) -> bool:
        """[U < x] for x with first _STEP digits `first` and first b digits `later(b)` (None: not certified):
        U extended where the digits tie; not certified, or tied for _MAX_STEPS steps, counts as U ≥ x."""
        while True:
            digits = first if self.step == 1 else later(self.step * _STEP)
            if digits is None:
                return False
            if self.u != digits:
                return self.u < digits
            if self.step == _MAX_STEPS:
                return False
            self.u, self.step = (self.u << _STEP) | self.read(_STEP), self.step + 1


def _passes(read: Callable[[int], int], sigma: float, m: int, first: int | None) -> bool:
    """B = [U < p_m], p_m's digits from `first` (its first _STEP) and tail_bits."""
    return _Uniform(read).below(first, partial(tail_bits, sigma, m))


def thresholded_array(key: PRFKey, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike, sigma: float,
                      floors: npt.ArrayLike) -> np.ndarray:
    """Per key j, from its own stream (as `discrete_gaussian_array`): Z_j ~ N_Z(0, σ²) where Z_j ≥ floors_j, and
    floors_j − 1 where not — in law, d ↦ (d if d ≥ f else f − 1) of a full draw d (not its value: see above)."""
    blocks = _blocks(counters_hi, counters_lo)
    m = np.asarray(floors, dtype=np.int64)
    if m.shape != (len(blocks) // 16,):
        raise ValueError("floors must have one integer per counter")
    sampler = DiscreteGaussian(sigma)
    out = m - 1
    below, use, table = _decided(key, blocks, sigma, m)
    rest = np.flatnonzero(~below)
    if not rest.size:
        return out
    full = rest[~use[rest]]
    if full.size:                                # c ≥ T, or tails too long to sum: one full draw each
        hi, lo = _u64(counters_hi), _u64(counters_lo)
        z = discrete_gaussian_array(key, hi[full], lo[full], sigma)
        out[full] = np.where(z >= m[full], z, m[full] - 1)
    rest = rest[use[rest]]
    mine = np.frombuffer(blocks, dtype=np.uint8).reshape(-1, 16)[rest].tobytes()
    streams = KeyedStreams(key, mine)
    for i, j in enumerate(rest.tolist()):
        mj = int(m[j])
        read = streams.reader(i)
        if _passes(read, sigma, mj, table[mj - 1]):
            out[j] = sampler.draw_at_least(read, mj)
    return out
