"""Composition, the one place for it: exact composition of the Gaussian rounds inside one multi-round
mechanism (DP-SIPS, MAD2R, …), composition of round budgets (`Spent`) and the (ε, δ) statement of a
zCDP guarantee.

Every round j adds N(0, σ_j²) to weights of ℓ2 sensitivity Δ_j, so it is μ_j-GDP with μ_j = Δ_j/σ_j
(Dong, Roth & Su 2022, "Gaussian differential privacy", JRSS-B, Thm 2.7), and the adaptively
composed rounds are exactly μ-GDP with μ = √(Σ μ_j²) (ibid. Cor. 3.3). Each round also spends δ_j
on the event that a novel key clears its threshold (Gopi et al. ICML 2020 Thm 5.1; DP-SIPS Thm 13),
and those events add by a union bound (DP-SIPS Thm 14).

- (ε, δ)-DP: μ is calibrated to (ε, δ/2). μ-GDP is (ε, δ(ε))-DP with δ(ε) = Φ(−ε/μ + μ/2) −
  e^ε Φ(−ε/μ − μ/2) (Dong et al. Cor. 2.13), the analytic-Gaussian curve of N(0, 1/μ²) at
  sensitivity 1 (Balle & Wang 2018, Thm 8), so μ = 1/σ with σ the analytic-Gaussian σ at
  (ε, δ/2). The novel-key events share the other δ/2.
- δ-approximate ρ-zCDP: round j gets ρ_j = share_j·ρ (σ_j = Δ_j/√(2ρ_j), Bun & Steinke 2016
  Prop. 1.6; additive, Lemma 2.3) and δ_j = share_j·δ (DP-SIPS Alg. 3, Thm 14). The same rounds
  are √(2ρ)-GDP, the μ reported.

Either way round j gets μ_j² = share_j·μ² (the σ_j⁻² split of DP-SIPS Alg. 3 lines 3–6), σ_j is
rounded up, and Σ δ_j is exactly the novel-key share.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import InvalidParameter
from .budget import Budget, EpsDelta, _exact_parts
from .calibration import _up, analytic_gaussian_sigma, zcdp_sigma
from .conversions import approx_zcdp_epsilon


class GaussianRounds(NamedTuple):
    """The joint μ (μ-GDP of all Gaussian rounds together), each round's σ_j, and each round's δ_j
    for its novel-key event (the threshold of round j uses δ_j)."""

    mu: float
    sigmas: list[float]
    novel_deltas: list[float]


def _check_shares(shares: Sequence[float], sensitivities: Sequence[float]) -> list[float]:
    shares = [float(s) for s in shares]
    if not shares or min(shares) <= 0 or not math.isclose(math.fsum(shares), 1.0, rel_tol=0, abs_tol=1e-12):
        raise InvalidParameter(f"round shares must be > 0 and sum to 1, got {shares!r}")
    if len(sensitivities) != len(shares) or not all(d > 0 and math.isfinite(d) for d in sensitivities):
        raise InvalidParameter(f"need one finite sensitivity > 0 per round, got {sensitivities!r}")
    return shares


def gaussian_rounds(budget: Budget, shares: Sequence[float],
                    sensitivities: Sequence[float] | None = None) -> GaussianRounds:
    """σ_j and δ_j of Gaussian rounds that together spend exactly `budget` (see the module docstring).

    `shares[j]` is round j's share of μ² (of ρ under zCDP) and of the novel-key δ; `sensitivities[j]`
    is round j's ℓ2 sensitivity Δ_j (default 1), so μ_j = Δ_j/σ_j.
    """
    sensitivities = [1.0] * len(shares) if sensitivities is None else [float(d) for d in sensitivities]
    shares = _check_shares(shares, sensitivities)
    if isinstance(budget, EpsDelta):
        # μ-GDP ⇔ N(0, 1/μ²) at sensitivity 1 (Dong et al. Cor. 2.13); its (ε, δ/2) curve is Balle–Wang Thm 8.
        mu = 1.0 / analytic_gaussian_sigma(budget.epsilon, budget.delta / 2)
        novel = budget.delta / 2
        # μ_j = Δ_j/σ_j with μ_j² = share_j·μ², σ rounded up so √Σμ_j² ≤ μ (Dong et al. Cor. 3.3).
        sigmas = [_up(d / (mu * math.sqrt(s))) for s, d in zip(shares, sensitivities, strict=True)]
    else:
        mu = math.sqrt(2 * budget.rho)        # ρ-zCDP Gaussians: Δ²/(2σ²) = ρ ⇔ Δ/σ = √(2ρ)
        novel = budget.delta
        sigmas = [zcdp_sigma(r, d) for r, d in zip(_exact_parts(budget.rho, shares), sensitivities, strict=True)]
    return GaussianRounds(mu, sigmas, _exact_parts(novel, shares))


def composition_lines(budget: Budget, sigmas: list[float], mus: list[float]) -> list[str]:
    """How a plan's Gaussian rounds (σ_j, μ_j = Δ_j/σ_j) compose, for reports: μ, each σ_j, the conversion."""
    mu = math.sqrt(math.fsum(m * m for m in mus))
    sig = ", ".join(f"{s:.6g}" for s in sigmas)
    head = f"rounds jointly μ-GDP, μ = √Σ(Δ_j/σ_j)² = {mu:.6g}, σ_j = {sig} (Dong, Roth & Su 2022, Cor. 3.3)"
    if isinstance(budget, EpsDelta):
        return [head, "(ε, δ/2) ↔ μ-GDP by the analytic Gaussian (Balle & Wang 2018 Thm 8; Dong et al. Cor. 2.13); "
                      "δ/2 over the rounds' novel-key events"]
    return [head, "zCDP: ρ_j = Δ_j²/(2σ_j²) add (Bun & Steinke 2016 Lemma 2.3), μ = √(2ρ); "
                  "δ over the rounds' novel-key events"]


def zcdp_as_dp(rho: float, delta: float) -> tuple[float, float]:
    """(ε, δ_DP) implied by δ-approximate ρ-zCDP: DP-SIPS Corollary 9 with δ' = δ, so δ_DP = δ + (1−δ)δ."""
    delta_dp = delta + (1 - delta) * delta
    return approx_zcdp_epsilon(rho, delta, delta_dp), delta_dp


@dataclass(frozen=True)
class Spent:
    """Privacy spent. `epsilon`/`delta` always state (ε, δ)-DP; `rho`/`zcdp_delta` where zCDP was used.

    For zCDP, (ε, δ) is the DP-SIPS Corollary 9 conversion with δ' = δ (so δ_DP = δ + (1−δ)δ).
    """

    epsilon: float
    delta: float
    rho: float | None = None
    zcdp_delta: float | None = None

    def as_dict(self) -> dict:
        out: dict[str, float | None] = {"epsilon": self.epsilon, "delta": self.delta}
        if self.rho is not None:
            out |= {"rho": self.rho, "zcdp_delta": self.zcdp_delta}
        return out

    def __str__(self) -> str:
        dp = f"(ε={self.epsilon:.4g}, δ={self.delta:.3g})-DP"
        if self.rho is None:
            return dp
        return f"{self.zcdp_delta:.3g}-approximate {self.rho:.4g}-zCDP, which implies {dp}"
