"""Exact sampling of the discrete Gaussian on the integers from a PRF bit stream (numpy-free, exact).

Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
(arXiv:2004.00010): Bernoulli(exp(−γ)) by von Neumann's method (§5.1, Alg. 1, with γ > 1 split
into ⌊γ⌋ factors exp(−1)), the discrete Laplace (§5.2, Alg. 2) and the discrete Gaussian by
rejection from it (§5.3, Alg. 3). All arithmetic is on Python ints and `fractions.Fraction`
(σ is a double, hence an exact rational), so the output distribution is exactly N_Z(0, σ²):
P[Y = y] ∝ exp(−y²/(2σ²)) on ℤ — no floating point touches it, which is what removes the
Mironov (2012) leak of float noise (reachable outputs depending on the true count).

Privacy: adding N_Z(0, σ²) to an integer query of sensitivity Δ is ½(Δ/σ)²-zCDP (CKS20, arXiv:2004.00010 Prop. 4),
the same bound as the continuous Gaussian, so the charge 1/(2σ²) of a count is unchanged.

Keyed arrays (`discrete_gaussian_array`): key j's draw reads its own bit stream, under the sub-key
AES_K(hi_j ‖ lo_j) of its 128-bit counter (a PRF value at a distinct input, so a pseudorandom key),
so each draw is a function of (K, counter) only: independent across keys and measures (distinct K),
and unchanged by which other keys are present or their order.

Why our own sampler: OpenDP's exact samplers draw from the OS CSPRNG and cannot be seeded, so
`seed=` releases would not reproduce; this one reads its bits from duckdp's AES PRF (prf.BitStream).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .prf import BitStream, PRFKey, _aes, _u64


def bernoulli(bits: BitStream, p: Fraction) -> bool:
    """Bernoulli(p) for rational p ∈ [0, 1]: a uniform integer below the denominator < the numerator."""
    return bits.below(p.denominator) < p.numerator


def bernoulli_exp(bits: BitStream, gamma: Fraction) -> bool:
    """Bernoulli(exp(−γ)) for rational γ ≥ 0 (CKS20 Alg. 1; γ > 1 as ⌊γ⌋ draws of exp(−1) and one of the rest)."""
    while gamma > 1:
        if not bernoulli_exp(bits, Fraction(1)):
            return False
        gamma -= 1
    k = 1
    while bernoulli(bits, gamma / k):
        k += 1
    return k % 2 == 1


def discrete_laplace(bits: BitStream, t: int) -> int:
    """Y with P[Y = y] ∝ exp(−|y|/t) on ℤ, integer t ≥ 1 (CKS20 Alg. 2 with s = 1)."""
    while True:
        u = bits.below(t)
        if not bernoulli_exp(bits, Fraction(u, t)):
            continue
        v = 0
        while bernoulli_exp(bits, Fraction(1)):
            v += 1
        y = u + t * v
        negative = bits.bits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(bits: BitStream, sigma: float) -> int:
    """Y ~ N_Z(0, σ²) exactly, σ > 0 a double (CKS20 Alg. 3: t = ⌊σ⌋ + 1, accept a discrete Laplace
    draw Y with probability exp(−(|Y| − σ²/t)²/(2σ²)))."""
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    var = Fraction(sigma) ** 2
    t = math.floor(sigma) + 1
    while True:
        y = discrete_laplace(bits, t)
        if bernoulli_exp(bits, (abs(y) - var / t) ** 2 / (2 * var)):
            return y


def discrete_gaussian_array(key: PRFKey, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike,
                            sigma: float) -> np.ndarray:
    """One exact N_Z(0, σ²) draw per 128-bit counter (int64), each from its own stream (see above).

    Exact like `discrete_gaussian` (CKS20 Alg. 3, on Python ints); the loop runs per key in Python
    (~10⁴ keys/s), which suits per-key metrics of released keys, not whole histograms.
    """
    hi, lo = _u64(counters_hi), _u64(counters_lo)
    if hi.shape != lo.shape or hi.ndim != 1:
        raise ValueError("counters_hi and counters_lo must be 1-d arrays of the same length")
    blocks = np.empty((hi.size, 2), dtype=">u8")
    blocks[:, 0], blocks[:, 1] = hi, lo
    subkeys = _aes(key.key, blocks.tobytes())
    draws = (discrete_gaussian(BitStream(PRFKey(subkeys[16 * j:16 * j + 16])), sigma) for j in range(hi.size))
    return np.fromiter(draws, dtype=np.int64, count=hi.size)
