"""The Basic mechanisms: weighted/count histograms with Gaussian/Laplace noise, one round.

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private Set Union", ICML 2020
§1.1, and the journal version's App. A/B. Each user keeps at most Δ0 distinct keys (uniform
keyed-hash subsample); the weighted versions add 1/√|W̄| (ℓ2 sensitivity 1, novel sensitivity
ρ(k) = 1/√k) or 1/|W̄| (ℓ1 sensitivity 1, ρ(k) = 1/k) to each kept key; the count versions add 1
(sensitivity √Δ0 in ℓ2 or Δ0 in ℓ1, ρ(k) = 1) and scale the noise accordingly.
"""
from __future__ import annotations

import math
from typing import ClassVar

import pyarrow as pa

from ..privacy.budget import Budget, EpsDelta, split_exact
from ..privacy.calibration import (
    NoveltyBound,
    analytic_gaussian_sigma,
    constant_novelty,
    gaussian_threshold,
    laplace_scale,
    laplace_threshold,
    weighted_l1_novelty,
    weighted_l2_novelty,
    zcdp_sigma,
)
from ..privacy.composition import gaussian_rounds
from ..stages.base import Engine, Frame
from .base import Mechanism, Params, Round, RoundPlan, approx_budget


def gaussian_round(budget: Budget, max_contributions: int, sensitivity: float = 1.0,
                   novelty: NoveltyBound = weighted_l2_novelty) -> RoundPlan:
    """σ and T for one Gaussian weight-and-threshold round with ℓ2 sensitivity `sensitivity`.

    (ε, δ): σ from the analytic Gaussian at (ε, δ/2), T with δ/2 (Gopi et al. Thm 5.1 / B.2 / A.2).
    zCDP: σ = Δ/√(2ρ), T with the whole δ (DP-SIPS Alg. 2, Thm 13).
    """
    if isinstance(budget, EpsDelta):
        sigma = analytic_gaussian_sigma(budget.epsilon, budget.delta / 2, sensitivity)
        novel_delta = budget.delta / 2
    else:
        sigma = zcdp_sigma(budget.rho, sensitivity)
        novel_delta = budget.delta
    return RoundPlan(budget, "gaussian", sigma, gaussian_threshold(sigma, novel_delta, max_contributions, novelty),
                     sensitivity=float(sensitivity), novel_delta=novel_delta)


def composed_gaussian_rounds(budget: Budget, shares: list[float], max_contributions: int,
                             novelties: list[NoveltyBound] | None = None,
                             sensitivities: list[float] | None = None) -> list[RoundPlan]:
    """σ_j and T_j of Gaussian rounds composed exactly (privacy.composition.gaussian_rounds: jointly
    μ-GDP, Dong, Roth & Su 2022 Cor. 3.3; zCDP: additive ρ_j), with T_j at the round's novel-key δ_j
    and novel sensitivity `novelties[j]` (Gopi et al. Thm 5.1; DP-SIPS Alg. 2, Thm 13).

    Each round's `budget` is its share of the request (Σ = the request exactly): what ledgers add
    up, not a guarantee of the round alone; each plan records μ_j = Δ_j/σ_j and δ_j.
    """
    novelties = novelties or [weighted_l2_novelty] * len(shares)
    sensitivities = sensitivities or [1.0] * len(shares)
    composed = gaussian_rounds(budget, shares, sensitivities)
    return [RoundPlan(part, "gaussian", sigma, gaussian_threshold(sigma, novel, max_contributions, novelty),
                      sensitivity=float(d), novel_delta=novel, mu=d / sigma)
            for part, sigma, novel, novelty, d in zip(split_exact(budget, shares), composed.sigmas,
                                                     composed.novel_deltas, novelties, sensitivities, strict=True)]


def laplace_round(budget: EpsDelta, max_contributions: int, sensitivity: float = 1.0,
                  novelty: NoveltyBound = weighted_l1_novelty) -> RoundPlan:
    """λ = Δ1/ε and T = max_t [ρ(t) + λ log(1/(2(1−(1−δ)^{1/t})))] (Gopi et al. Thm 4.1 / B.1 / A.1)."""
    scale = laplace_scale(budget.epsilon, sensitivity)
    return RoundPlan(budget, "laplace", scale, laplace_threshold(scale, budget.delta, max_contributions, novelty),
                     sensitivity=float(sensitivity), novel_delta=budget.delta)


def basic_weights(stages: Engine, max_contributions: int, exponent: float, pairs: Frame | None = None) -> Frame:
    """Per-key weights (keys, _dp_w) of `pairs` (default: the input's distinct pairs), truncated
    to Δ0 per user with a fresh salt: the pairs → truncate → weights stages every Basic round shares."""
    pairs = stages.pairs() if pairs is None else pairs
    return stages.weights(stages.truncate(stages.sized(pairs), max_contributions), exponent)


class _Basic(Mechanism):
    exponent: ClassVar[float]           # every Basic variant sets its weighting exponent

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        (round_plan,) = plan
        weights = basic_weights(stages, params.delta0, self.exponent)
        table = stages.output(stages.release(weights, round_plan))
        return table, [Round.from_plan(0, round_plan, stages.num_rows(table))]


class WeightedGaussian(_Basic):
    name = "weighted_gaussian"
    aliases = ("basic",)
    citation = "Gopi et al., ICML 2020, Thm 5.1 / journal Thm B.2; zCDP: Swanberg et al. (DP-SIPS) Alg. 2, Thm 13"
    summary = "Each user adds 1/√|W̄| to each kept key; Gaussian noise; one threshold."
    exponent = 0.5

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        return [gaussian_round(budget, params.delta0)]


class CountGaussian(_Basic):
    name = "count_gaussian"
    citation = "Gopi et al., ICML 2020 §1.1 / journal Thm A.2 (ℓ2 sensitivity √Δ0)"
    summary = "Each user adds 1 to each kept key; Gaussian noise scaled by √Δ0; threshold in count units."
    exponent = 0.0

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        max_contributions = params.delta0
        # Counts have ℓ2 sensitivity √Δ0 and a novel key's count is at most 1 (journal Thm A.2).
        return [gaussian_round(budget, max_contributions, math.sqrt(max_contributions), constant_novelty(1.0))]


class WeightedLaplace(_Basic):
    name = "weighted_laplace"
    citation = "Gopi et al., journal version, Alg. 9, Thm B.1"
    summary = "Each user adds 1/|W̄| to each kept key; Laplace noise λ = 1/ε; one threshold."
    budgets = (EpsDelta,)
    exponent = 1.0

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        return [laplace_round(approx_budget(budget), params.delta0)]


class CountLaplace(_Basic):
    name = "count_laplace"
    citation = "Gopi et al., ICML 2020 §1.1 / journal Thm A.1 (ℓ1 sensitivity Δ0)"
    summary = "Each user adds 1 to each kept key; Laplace noise λ = Δ0/ε; threshold in count units."
    budgets = (EpsDelta,)
    exponent = 0.0

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        max_contributions = params.delta0
        # Counts have ℓ1 sensitivity Δ0 and a novel key's count is at most 1 (journal Thm A.1).
        return [laplace_round(approx_budget(budget), max_contributions, float(max_contributions),
                              constant_novelty(1.0))]
