"""Privacy events of releases and their tight composition under (ε, δ)-DP.

The functions here compose curve events (privacy/events.py), each a privacy-loss curve plus an
additive δ: `GaussianEvent` (μ-GDP, Dong, Roth & Su 2022, Thm 2.7, for (ε, δ) and zCDP calibrations
alike), `LaplaceEvent` (pure ε) and `DpEvent` (a generic (ε, 0) privacy-loss pair plus δ; a zCDP
step enters at its DP-SIPS Cor. 9 conversion, privacy/accountant.py). The (ε, δ) accountant
(privacy/accountant.py) is built on them.

Composition. The rounds of a release and the releases of a session compose adaptively. Every
event's output is, outside an event of probability at most its δ, a post-processing of its
curve's mechanism, so the sequence is (ε, δ_curve(ε) + Σ δ_i)-DP where δ_curve is the composed
curve's privacy profile (the standard argument of Dwork & Roth 2014, Thm 3.16, applied to the bad
events). All-Gaussian curves compose exactly: μ = √(Σ μ_i²) (Dong, Roth & Su 2022, Cor. 3.3),
δ_curve(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (their Cor. 2.13, = Balle & Wang 2018, Thm 8).
Mixed curves use a pessimistic privacy-loss distribution from Google's `dp_accounting` (Koskela
et al. / Doroshenko et al. 2022 "connect the dots"), whose δ is an upper bound.

Every returned δ is rounded up and every returned ε is rounded up.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from scipy.optimize import brentq

from .calibration import _up, analytic_gaussian_delta
from .events import CurveEvent, GaussianEvent, LaplaceEvent, curve_delta

# PLD grid: 1e-4 in privacy loss (ε within ~1e-3 of exact), coarser when the losses span more than
# ±1 (at most ~2e4 grid points per unit of span); any grid gives an upper bound (pessimistic rounding).
_PLD_INTERVAL = 1e-4
_PLD_POINTS = 20_000
_MAX_SPAN = 500.0          # e^ε overflows past ~709; such budgets protect nothing but must still run


def _sum_up(values: Iterable[float]) -> float:
    """The exact sum of floats, rounded up to a float."""
    exact = sum(map(Fraction, values), Fraction(0))
    f = float(exact)
    return f if Fraction(f) >= exact else math.nextafter(f, math.inf)


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13), rounded up."""
    return min(_up(max(analytic_gaussian_delta(1.0 / mu, epsilon), 0.0)), 1.0)


@functools.lru_cache(maxsize=256)
def _curve(events: tuple[CurveEvent, ...]) -> tuple[float, float, Any]:
    """(μ, shift, pld) of the events' curves: the composed Gaussian μ, shift = Σ ε_i of the other
    (pure ε_i-DP) curves, and a pessimistic PLD of all curves when any is not Gaussian and
    shift ≤ _MAX_SPAN (e^ε overflows beyond ~709)."""
    mu = math.sqrt(_sum_up(e.mu ** 2 for e in events if isinstance(e, GaussianEvent))) if events else 0.0
    mu = math.nextafter(mu, math.inf) if mu else 0.0
    others = [e for e in events if not isinstance(e, GaussianEvent)]
    shift = _sum_up(e.epsilon for e in others) if others else 0.0
    if not others or shift > _MAX_SPAN:
        return mu, shift, None
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    # span of the composed privacy loss: Σ ε_i, plus μ²/2 ± 11μ for the Gaussian (mass below e^-50 cut)
    grid = max(_PLD_INTERVAL, (shift + mu * (mu / 2 + 11)) / _PLD_POINTS)
    plds = []
    if mu:
        plds.append(pld_lib.from_gaussian_mechanism(1.0 / mu, value_discretization_interval=grid))
    for e in others:
        if isinstance(e, LaplaceEvent):
            plds.append(pld_lib.from_laplace_mechanism(1.0 / e.epsilon, value_discretization_interval=grid))
        else:
            plds.append(pld_lib.from_privacy_parameters(DifferentialPrivacyParameters(e.epsilon, 0.0),
                                                        value_discretization_interval=grid))
    pld = plds[0]
    for p in plds[1:]:
        pld = pld.compose(p)
    return mu, shift, pld


def extra_delta(events: Iterable[CurveEvent]) -> float:
    """Σ δ_i of the events (novel-key and generic δ), exact and rounded up."""
    return _sum_up(curve_delta(e) for e in events)


def _gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε ≥ 0 with δ_μ-GDP(ε) ≤ δ (rounded up; 0 for μ = 0)."""
    if not mu or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(mu, hi) > delta:
        hi *= 2
    eps = brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)
    while gdp_delta(mu, eps) > delta:              # the root may sit on the wrong side by float error
        eps = math.nextafter(eps, math.inf) * (1 + 1e-15)
    return _up(eps)


def composed_delta(events: Sequence[CurveEvent], epsilon: float) -> float:
    """δ with which the sequence of events is (ε, δ)-DP: δ_curve(ε) + Σ δ_i, rounded up.

    δ_curve is the smaller of two upper bounds: the PLD's, and basic composition of the pure
    curves (Σ ε_i) with the Gaussian part, δ_μ(ε − Σ ε_i) — so mixing never costs more than
    basic composition, and pure rounds at exactly their ε are not charged PLD grid error.
    """
    if not events:
        return 0.0
    mu, shift, pld = _curve(tuple(events))
    curve = 1.0 if epsilon < shift else gdp_delta(mu, epsilon - shift) if mu else 0.0
    if pld is not None:
        curve = min(curve, _up(float(pld.get_delta_for_epsilon(epsilon))))
    return min(_sum_up([curve, extra_delta(events)]), 1.0)


def composed_epsilon(events: Sequence[CurveEvent], delta: float) -> float:
    """Smallest ε (rounded up) at which the events are (ε, δ)-DP; inf if Σ δ_i ≥ δ; 0 for none."""
    if not events:
        return 0.0
    room = delta - extra_delta(events)
    mu, shift, pld = _curve(tuple(events))
    if room < 0 or (room == 0 and mu):          # pure curves reach δ_curve = 0 at ε = Σ ε_i
        return math.inf
    eps = _sum_up([shift, _gdp_epsilon(mu, room)])
    if pld is not None and room > 0:
        eps = min(eps, _up(float(pld.get_epsilon_for_delta(room))))
    return eps


def admits(events: Sequence[CurveEvent], epsilon: float, delta: float) -> bool:
    """Whether the sequence is (ε, δ)-DP by this accounting."""
    return composed_delta(events, epsilon) <= delta


__all__ = ["admits", "composed_delta", "composed_epsilon", "extra_delta", "gdp_delta"]
