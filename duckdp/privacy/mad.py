"""MAD / MAD2R parameters and the privacy conditions they must satisfy.

Chen, Cohen-Addad, Epasto, Zadimoghaddam, "Scalable Private Partition Selection via Adaptive
Weighting", ICML 2025, as reconstructed in `docs/specs/mad-mad2r.md` (section numbers below refer to
that spec). Every function refuses values that would break the ℓ2-sensitivity-1 (Lemma 5.8) or
novel-sensitivity (Lemma 5.4) arguments, so a plan built from them is private by Thm 3.3.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ..errors import InvalidParameter
from .calibration import NoveltyBound


def _real(name: str, value: Any, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise InvalidParameter(f"{name} must be a finite number, got {value!r}")
    v = float(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise InvalidParameter(f"{name} must be in [{lo if lo is not None else '-inf'}, "
                               f"{hi if hi is not None else 'inf'}], got {value!r}")
    return v


def check_degree(name: str, value: Any) -> int:
    """An adaptive-degree bound: an integer ≥ 1 (§5, adaptive users A = {Δ_min ≤ d_u ≤ Δ_max})."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidParameter(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_excess(value: Any) -> float:
    """b ≥ 0 in τ = T + bσ (§5): items are truncated no lower than the release threshold T."""
    return _real("adaptive_excess", value, 0.0)


def check_split(value: Any) -> float:
    """α ∈ (0, 1): round 1 gets (αε, αδ), round 2 the rest (§6)."""
    v = _real("split", value)
    if not 0.0 < v < 1.0:
        raise InvalidParameter(f"split must be in (0, 1), got {value!r}")
    return v


def check_confidence(name: str, value: Any) -> float:
    """c_L, c_U ≥ 0: confidence multipliers of σ1 (§6; a heuristic that does not affect privacy)."""
    return _real(name, value, 0.0)


def check_beta_min(value: Any) -> float:
    """β_min ∈ (0, 1] (§4: biases are clipped to [β_min, 1])."""
    v = _real("beta_min", value)
    if not 0.0 < v <= 1.0:
        raise InvalidParameter(f"beta_min must be in (0, 1], got {value!r}")
    return v


def check_beta_max(value: Any) -> float:
    """β_max ≥ 1 (§4: the per-item cap β_max/√d must allow the unit-norm vector 1/√d)."""
    return _real("beta_max", value, 1.0)


def max_reroute_fraction(beta_min: float, max_degree: int) -> float:
    """f* = β_min(1/√Δ_max − 1/(2Δ_max)): largest f with ℓ2 sensitivity ≤ 1 (spec §5 eq. (6), Lemma 5.8)."""
    return beta_min * (1.0 / math.sqrt(max_degree) - 1.0 / (2.0 * max_degree))


def reroute_fraction(requested: Any, beta_min: float, beta_max: float, max_degree: int) -> float:
    """The reroute fraction f: f* by default; a smaller f is allowed, a larger one refused.

    Also checks f·β_max ≤ 1/2, which Lemma 5.4 needs for novel sensitivity β_max/√k (spec §5.2, §6).
    """
    bound = max_reroute_fraction(beta_min, max_degree)
    f = bound if requested is None else _real("reroute_fraction", requested, 0.0)
    if f > bound:
        raise InvalidParameter(f"reroute_fraction={f!r} exceeds β_min(1/√Δ_max − 1/(2Δ_max)) = {bound:.6g} "
                               f"(Δ_max={max_degree}); larger values break ℓ2 sensitivity 1 (spec §5.2, Lemma 5.8)")
    if f * beta_max > 0.5:
        raise InvalidParameter(f"reroute_fraction·beta_max = {f * beta_max:.6g} > 1/2 breaks novel sensitivity "
                               f"β_max/√k (spec §5.2, Lemma 5.4); raise max_adaptive_degree or lower beta_max")
    return f


def check_degrees(min_degree: int, max_degree: int) -> None:
    """Δ_min ≤ Δ_max, else no user could be adaptive (spec §5)."""
    if min_degree > max_degree:
        raise InvalidParameter(f"adaptive_min_degree={min_degree} exceeds max_adaptive_degree={max_degree}")


def adaptive_threshold(threshold: float, sigma: float, excess: float, beta_max: float = 1.0) -> float:
    """τ = T + bσ (spec §5), refused unless τ ≥ β_max so novel items are never truncated (Lemma 5.4)."""
    tau = threshold + excess * sigma
    if tau < beta_max:
        raise InvalidParameter(f"adaptive threshold τ = {tau:.6g} < β_max = {beta_max:g}: novel items could be "
                               "truncated, which the novel-sensitivity bound excludes (spec §5.2, Lemma 5.4)")
    return tau


def biased_novelty(beta_max: float) -> NoveltyBound:
    """ρ(k) = β_max/√k: novel sensitivity of biased MAD (spec §5.2, Lemma 5.4; 1/√k when β_max = 1)."""
    return lambda k: beta_max / np.sqrt(k)
