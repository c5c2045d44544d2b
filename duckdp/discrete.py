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

Why our own sampler: OpenDP's exact samplers draw from the OS CSPRNG and cannot be seeded, so
`seed=` releases would not reproduce; this one reads its bits from duckdp's AES PRF (prf.BitStream).
"""
from __future__ import annotations

import math
from fractions import Fraction

from .prf import BitStream


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
