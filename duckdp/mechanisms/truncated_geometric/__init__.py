"""Optimal partition selection for one key per user: the truncated geometric mechanism.

Desfontaines, Voss, Gipson, Mandayam, "Differentially private partition selection", PoPETs 2022
(not in shared/papers). For Δ0 = 1 a user changes one key's distinct-user count n by 1, and
Theorem 1 gives the largest probability of keeping a key with n users that is (ε, δ)-DP between
n − 1 and n in both directions: π(0) = 0,
    π(n) = min(e^ε·π(n−1) + δ, 1 − e^{−ε}·(1 − π(n−1) − δ), 1).
It equals thresholding n plus truncated two-sided geometric noise of parameter e^{−ε} (hence the
name; `scale` reports 1/ε). Each key is kept iff one fresh uniform u of the shared noise stage
(duckdp/noise_stage.py: weight π(n), noise −u, threshold 0) has u ≤ π(n), so keep decisions are
independent across keys; u is on the grid (j + ½)·2⁻⁵³, so P(keep) is π(n) to within 2⁻⁵⁴.

Δ0 > 1: users keep Δ0 keys (the shared keyed-hash truncation stage, a fixed per-user function)
and every key uses π for (ε/Δ0, δ/Δ0). Adding or removing a user changes the counts of at most
Δ0 keys by 1 and leaves every other key's input unchanged; the keep decisions are independent,
so the output is a product of per-key mechanisms of which at most Δ0 differ, each
(ε/Δ0, δ/Δ0)-DP, and basic composition (Dwork & Roth 2014, Thm 3.16) gives (ε, δ)-DP.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ...errors import InvalidParameter
from ...privacy.budget import Budget, EpsDelta
from ...stages.base import Engine
from ..base import Mechanism, Params, Round, RoundPlan, approx_budget
from ..basic import basic_weights
from ..guarantee import RoundGuarantee

_MAX_STEPS = 2_000_000      # π reaches 1 after about 2·log(1/δ)/ε steps; beyond this ε is impractically small


def keep_probabilities(epsilon: float, delta: float) -> np.ndarray:
    """π(1), …, π(n*−1) from the recurrence of Desfontaines et al. 2022, Thm 1; π(n) = 1 for n ≥ n*."""
    if 2 * math.log1p(1 / delta) / epsilon + 2 > _MAX_STEPS:
        raise InvalidParameter(f"per-key ε={epsilon:g}, δ={delta:g} need more than {_MAX_STEPS:,} keep "
                               "probabilities; raise epsilon or lower max_contributions")
    grow, shrink = math.exp(epsilon), math.exp(-epsilon)
    probs: list[float] = []
    p = 0.0
    while True:
        p = min(grow * p + delta, 1.0 - shrink * (1.0 - p - delta), 1.0)
        if p >= 1.0:
            return np.array(probs, dtype=np.float64)
        probs.append(p)


@dataclass(frozen=True)
class GeometricRound:
    """The per-key budget (ε/Δ0, δ/Δ0) each key's keep decision uses."""

    per_key_epsilon: float
    per_key_delta: float


class TruncatedGeometric(Mechanism):
    name = "truncated_geometric"
    citation = ("Desfontaines, Voss, Gipson, Mandayam, Differentially private partition selection, "
                "PoPETs 2022, Thm 1; Δ0 > 1 by basic composition (Dwork & Roth Thm 3.16)")
    summary = ("Keeps a key held by n users with the optimal probability π(n) (one user, one key); "
               "Δ0 > 1 splits (ε, δ) evenly over the Δ0 keys a user can touch.")
    budgets = (EpsDelta,)
    exponent = 0.0

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        per_key = approx_budget(budget).scaled(1.0 / params.delta0)
        always = len(keep_probabilities(per_key.epsilon, per_key.delta)) + 1      # n*: π(n*) = 1
        return [RoundPlan(budget, "uniform", 1.0 / per_key.epsilon, float(always),
                          GeometricRound(per_key.epsilon, per_key.delta))]

    def explain_round(self, index: int, plan: RoundPlan, params: Params) -> RoundGuarantee:
        """A key held by N users is kept with exactly π(N) (Desfontaines et al. 2022 Thm 1)."""
        probs = np.concatenate([[0.0], keep_probabilities(plan.extra.per_key_epsilon, plan.extra.per_key_delta)])
        keep = lambda n, k: np.where(n < len(probs), probs[np.minimum(n, len(probs) - 1).astype(np.int64)], 1.0)
        return RoundGuarantee("bound", "a key held by N users is kept with probability π(N)", keep, [
            (f"per-key budget ε = {plan.extra.per_key_epsilon:.4g}, δ = {plan.extra.per_key_delta:.3g}; "
            f"keys with ≥ {int(plan.threshold):,} users are always kept")])

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        (round_plan,) = plan
        probs = keep_probabilities(round_plan.extra.per_key_epsilon, round_plan.extra.per_key_delta)
        counts = basic_weights(stages, params.delta0, 0.0)
        table = stages.output(self.own_stages(stages).geometric_release(stages, counts, probs))
        return table, [Round.from_plan(0, round_plan, stages.num_rows(table))]
