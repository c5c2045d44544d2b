"""DP-SIPS: Weighted Gaussian run I times with geometrically growing budgets, removing found keys.

Swanberg, Desfontaines, Haney, "DP-SIPS: A simpler, more scalable mechanism for differentially
private partition selection" (PoPETs 2023), Algorithm 3. Round i (0-based) runs Weighted Gaussian
(Alg. 2: ℓ2 sensitivity 1, novel sensitivity ρ(k) = 1/√k) on every user's set minus the keys of
rounds 0..i−1, re-truncated to Δ0, with the share r^{I−i−1}(1−r)/(1−r^I) of the budget
(r = 1: an even split). The output is the union of the rounds' keys.

Privacy, zCDP: round i is δ_i-approximate ρ_i-zCDP (Thm 13); composition and post-processing
(Lemma 6) give Σρ_i = ρ and Σδ_i = δ (Thm 14).
Privacy, (ε, δ): the rounds' Gaussian noise is composed exactly (privacy/composition.py): round i
has σ_i⁻² = share_i·μ² with μ calibrated to (ε, δ/2) by the analytic Gaussian, so the rounds are
jointly μ-GDP (Dong, Roth & Su 2022, Cor. 3.3, adaptive), and round i's threshold uses
δ_i = share_i·δ/2 for its novel keys (Gopi et al. Thm 5.1; union bound as in Thm 14).
In both forms the float sum of the round budgets equals the request and never exceeds it.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import InternalError, InvalidParameter
from ..privacy.budget import Budget
from ..stages.base import Engine, Frame
from .base import Mechanism, Param, Params, Round, RoundPlan
from .basic import basic_weights, composed_gaussian_rounds
from .guarantee import RoundGuarantee


def _check_iterations(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidParameter(f"iterations must be an integer >= 1, got {value!r}")
    return int(value)


def _check_ratio(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0 < float(value) < math.inf):
        raise InvalidParameter(f"ratio must be a finite number > 0, got {value!r}")
    return float(value)


def round_shares(iterations: int, ratio: float) -> list[float]:
    """Round i's share r^{I−i−1}(1−r)/(1−r^I) of the budget, 1/I when r = 1 (DP-SIPS Alg. 3 lines 3–6).

    Evaluated as r^{I−i−1} / Σ_j r^j (the same number, stable near r = 1) in log space.
    """
    logs = np.arange(iterations - 1, -1, -1, dtype=float) * math.log(ratio)
    weights = np.exp(logs - logs.max())
    shares = weights / math.fsum(weights)
    if shares.min() <= 0:
        raise InvalidParameter(f"ratio={ratio!r} with iterations={iterations} leaves a round with no budget")
    return [float(s) for s in shares]


@dataclass(frozen=True)
class SipsRound:
    """A DP-SIPS round's share of the budget."""

    share: float


class DPSIPS(Mechanism):
    name = "dpsips"
    citation = "Swanberg, Desfontaines, Haney, DP-SIPS (PoPETs 2023), Alg. 3, Thm 14"
    summary = ("Weighted Gaussian over I rounds with geometrically growing budgets; each round removes "
               "the keys already released and re-truncates every user's set.")
    params = (
        Param("iterations", 3, "number of rounds I", _check_iterations),
        Param("ratio", 1 / 3, "budget ratio r between rounds i and i+1 (1 = even split)", _check_ratio),
    )

    exponent = 0.5

    def explain_round(self, index: int, plan: RoundPlan, params: Params) -> RoundGuarantee:
        g = super().explain_round(index, plan, params)
        if index:
            g.notes.append("keys released in earlier rounds are removed, so holders' sets only shrink")
        return g

    def explain_overall(self, rounds: list[RoundGuarantee]) -> tuple[Callable | None, list[str]]:
        """Later rounds see subsets of the users' sets, so each round's weight is still ≥ N/√k and its
        noise is fresh: P(released in some round) ≥ 1 − Π_i (1 − p_i) (Swanberg et al. Alg. 3)."""
        fns = [r.probability for r in rounds if r.probability is not None]
        if len(fns) != len(rounds):
            raise InternalError("every DP-SIPS round has a Gaussian release probability")
        return (lambda n, k: 1.0 - np.prod([1.0 - f(n, k) for f in fns], axis=0)), []

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        # Alg. 2 rounds (Thm 13; Gopi et al. Thm 5.1) with Alg. 3's geometric shares, composed exactly.
        shares = round_shares(params["iterations"], params["ratio"])
        plans = composed_gaussian_rounds(budget, shares, params.delta0)
        return [replace(rp, extra=SipsRound(share)) for share, rp in zip(shares, plans, strict=True)]

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        max_contributions = params.delta0
        pairs = stages.store(stages.round_pairs(), "pairs")     # distinct pairs, read from the input once
        released = stages.empty_keys(pairs)                     # P_0 ∪ … ∪ P_{i−1}
        rounds = []
        for i, round_plan in enumerate(plan[:-1]):
            released, count = stages.append(released, round_keys(stages, pairs, released, round_plan,
                                                                  max_contributions))
            rounds.append(Round.from_plan(i, round_plan, count))
        last = round_keys(stages, pairs, released, plan[-1], max_contributions)
        table = stages.output(stages.union(released, last))   # the last round's keys are never stored
        stored = sum(r.released for r in rounds)
        rounds.append(Round.from_plan(len(plan) - 1, plan[-1], stages.num_rows(table) - stored))
        return table, rounds


def round_weights(stages: Engine, pairs: Frame, released: Frame, max_contributions: int) -> Frame:
    """One round's weights: Basic 1/√|W̄| weights over the pairs whose key is not yet released
    (Alg. 3 line 9), re-truncated to Δ0 with a fresh salt."""
    return basic_weights(stages, max_contributions, 0.5, stages.remove(pairs, released))


def round_keys(stages: Engine, pairs: Frame, released: Frame, plan: RoundPlan, max_contributions: int) -> Frame:
    """One round's newly released keys: its weights, fresh noise and its threshold."""
    return stages.release(round_weights(stages, pairs, released, max_contributions), plan)
