"""Upper-tail probabilities p_m = P[Z ≥ m] of the discrete Gaussian Z ~ N_Z(0, σ²), rigorously, as many bits as asked.

keys="threshold" decides most candidate keys by one Bernoulli(p_m) each (duckdp/discrete.py
`thresholded_array`): a uniform read bit by bit from the key's stream is below p_m iff it is below p_m's binary
expansion, so the decision needs p_m's leading bits, exactly. `tail_bits(σ, m, bits)` gives L with
L/2^bits < p_m < (L + 1)/2^bits, from interval arithmetic (mpmath's interval context: every operation rounds outward,
so the true value lies inside each computed interval):

  f(z) = exp(−z²/(2σ²)) with σ² = P²/Q² exact;  S(m) = Σ_{z ≥ m} f(z);  p_m = S(m) / (f(0) + 2·S(1)),  m ≥ 1.

S(m) sums f(m), …, f(z_max) and adds [0, R] for the rest: for z > z_max the ratio f(z + 1)/f(z) =
exp(−(2z + 1)/(2σ²)) is at most r = exp(−(2z_max + 3)/(2σ²)), so Σ_{z > z_max} f(z) ≤ f(z_max + 1)/(1 − r).
z_max = M + ⌈σ·√(2·w·ln 2)⌉ + 2 for the largest m asked, M, makes that rest < 2^−w of S(M) at working precision w.
The interval of p_m is narrower than 2^−bits for w = bits + 40 unless p_m lies within ~2^−w of a multiple of
2^−bits; then w doubles (up to `_MAX_WORK` bits, where the caller treats the bit as undecided).
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

from mpmath.ctx_iv import MPIntervalContext

_MARGIN = 40                 # working bits beyond those asked
_MAX_WORK = 1 << 14          # give up past 16,384 working bits (p_m within 2^-16000 of a dyadic: never seen)
MAX_TERMS = 100_000          # largest z_max summed at `bits` + _MARGIN working bits


def largest_tail(sigma: float, bits: int) -> int:
    """The largest m whose `bits`-bit tail digits are summed (z_max = m + ⌈σ·√(2·w·ln 2)⌉ + 2 ≤ MAX_TERMS at
    w = bits + _MARGIN); below 1 where none is (σ ≳ 8,000 at 64 bits). A function of σ alone, so which keys
    use the digits never depends on the other keys of a call."""
    return MAX_TERMS - math.ceil(sigma * math.sqrt(2 * (bits + _MARGIN) * math.log(2))) - 2


def _tails(sigma: float, m_max: int, work: int) -> list[Any]:
    """Intervals of p_1, …, p_{m_max} at working precision `work`."""
    exact = Fraction(sigma)
    p2, q2 = exact.numerator ** 2, exact.denominator ** 2
    z_max = m_max + math.ceil(sigma * math.sqrt(2 * work * math.log(2))) + 2
    iv = MPIntervalContext()                    # a context of its own: its precision is no other caller's
    iv.prec = work
    den = iv.mpf(2 * p2)

    def f(z: int) -> Any:
        return iv.exp(-iv.mpf(z * z * q2) / den)

    ratio = iv.exp(-iv.mpf((2 * z_max + 3) * q2) / den)
    rest = iv.mpf([0, (f(z_max + 1) / (1 - ratio)).b])
    s = rest
    tails = [s] * (m_max + 1)
    for z in range(z_max, 0, -1):               # S(z) from the largest z down: S(z) = f(z) + S(z + 1)
        s = s + f(z)
        if z <= m_max:
            tails[z] = s
    total = 1 + 2 * s                           # f(0) + 2·S(1)
    return [tails[m] / total for m in range(1, m_max + 1)]


def _digits(interval: Any, bits: int) -> int | None:
    """L with L/2^bits < every point of `interval` < (L + 1)/2^bits, or None where it straddles or touches one."""
    scale = 2 ** bits
    low, high = interval.a * scale, interval.b * scale
    floor = int(low)                            # low ≥ 0
    return floor if floor < low and high < floor + 1 else None


@lru_cache(maxsize=64)
def tail_table(sigma: float, m_max: int, bits: int) -> tuple[int | None, ...]:
    """L_m = `tail_bits(σ, m, bits)` for m = 1, …, m_max (index m − 1), sharing one backward sum. A decided L_m is
    the one integer bracketing p_m, whatever the sum; an m left undecided is settled by the sum up to m alone, so
    whether it stays undecided never depends on m_max (on the other keys of a batch)."""
    work = bits + _MARGIN
    out: list[int | None] = [None] * m_max
    while True:
        todo = [i for i, v in enumerate(out) if v is None]
        if not todo or work > _MAX_WORK:
            break
        tails = _tails(sigma, todo[-1] + 1, work)
        for i in todo:
            out[i] = _digits(tails[i], bits)
        work *= 2
    for i in todo[:-1] if todo and todo[-1] == m_max - 1 else todo:
        out[i] = tail_table(sigma, i + 1, bits)[i]
    return tuple(out)


def tail_bits(sigma: float, m: int, bits: int) -> int | None:
    """L with L/2^bits < P[Z ≥ m] < (L + 1)/2^bits for Z ~ N_Z(0, σ²) and an integer m ≥ 1 (None: undecided at
    `_MAX_WORK` working bits, P[Z ≥ m] within 2^-16000 of a multiple of 2^-bits)."""
    return tail_table(sigma, m, bits)[m - 1]
