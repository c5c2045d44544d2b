"""Composition of round budgets and the (ε, δ) statement of a zCDP guarantee — the one place for both."""
from __future__ import annotations

from dataclasses import dataclass

from .budget import ZCDP, Budget, EpsDelta
from .conversions import approx_zcdp_epsilon


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

    @classmethod
    def of(cls, budgets: list[Budget]) -> Spent:
        """Compose round budgets: additively for zCDP (Bun–Steinke Lemma 8.2 via DP-SIPS Lemma 6,
        δ's summed as an upper bound) and by basic composition for (ε, δ)-DP (Dwork–Roth Thm 3.16)."""
        if not budgets:
            raise ValueError("a release spends at least one round's budget")
        if all(isinstance(b, ZCDP) for b in budgets):
            rho = sum(b.rho for b in budgets)
            delta = min(sum(b.delta for b in budgets), 1.0)
            epsilon, delta_dp = zcdp_as_dp(rho, delta)
            return cls(epsilon, delta_dp, rho, delta)
        if all(isinstance(b, EpsDelta) for b in budgets):
            return cls(sum(b.epsilon for b in budgets), min(sum(b.delta for b in budgets), 1.0))
        raise ValueError("cannot compose a mix of zCDP and (ε, δ) rounds")

    def as_dict(self) -> dict:
        out = {"epsilon": self.epsilon, "delta": self.delta}
        if self.rho is not None:
            out |= {"rho": self.rho, "zcdp_delta": self.zcdp_delta}
        return out

    def __str__(self) -> str:
        dp = f"(ε={self.epsilon:.4g}, δ={self.delta:.3g})-DP"
        if self.rho is None:
            return dp
        return f"{self.zcdp_delta:.3g}-approximate {self.rho:.4g}-zCDP, which implies {dp}"
