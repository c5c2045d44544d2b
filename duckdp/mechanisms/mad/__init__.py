"""MAD and MAD2R: adaptive weighting that reroutes excess weight, in one or two rounds.

Chen, Cohen-Addad, Epasto, Zadimoghaddam, "Scalable Private Partition Selection via Adaptive
Weighting", ICML 2025, implemented from the reconstruction `docs/specs/mad-mad2r.md` (section numbers
below refer to it; the paper's own formulas were not recoverable).

MAD (spec §5, paper Alg. 3): ℓ2 sensitivity 1 (Lemma 5.8) and novel sensitivity 1/√k (Lemma 5.4),
so inside the weight-and-threshold meta-algorithm (§2, Alg. 1, Thm 3.3) it uses exactly Basic's σ
and T (Corollary 5.2). MAD2R (spec §6, Alg. 4): round 1 is unbiased MAD, round 2
biased MAD with novel sensitivity β_max/√k (Lemma 5.4) on the sets left after removing O1 and keys
whose round-1 upper bound is below T2, with biases from round-1 lower bounds; each round is Thm 3.3
with ℓ2 sensitivity 1. The rounds get shares α and 1 − α of the budget composed exactly
(privacy/composition.py, our improvement on the spec's basic composition, Thm 5.1): under (ε, δ)
σ_1⁻² = α·μ², σ_2⁻² = (1−α)·μ² with μ calibrated to (ε, δ/2), jointly μ-GDP (Dong, Roth & Su 2022,
Cor. 3.3, adaptive); thresholds at αδ/2 and (1−α)δ/2. zCDP: (αρ, αδ) and ((1−α)ρ, (1−α)δ).

Stages: the engine's generic pairs → sized → truncate stages [sql/stage_*.sql], then this folder's
own (duckdb.py with the templates in ./sql, spark.py): stored user vectors [mad_vectors.sql; round 2:
mad2r_remaining.sql, mad2r_vectors.sql, mad2r_kept_biases.sql and mad2r_biased.sql (on DuckDB
written in place by mad2r_set_biased.sql; on Spark the first three as one statement,
mad2r_vectors_biased.sql)], MAD stages 1–4 [mad_weights.sql], the
generic noise + threshold stage (duckdp/noise_stage.py), and MAD2R's screen between the rounds
[mad2r_universe.sql, then `screen_round1` in numpy through the generic `decide` stage,
mad2r_status.sql: round-1 noisy weights on the whole universe and round-2 preprocessing, storing only
the keys released, removed or biased]. Engines may draw round 1's noise on keys no user kept only when
round 2's truncation may keep them (`own.mad2r_lazy`; DuckDB on integer keys and key ids: duckdb.py),
with the same release (docs/specs/mad-mad2r.md §6, "Lazy round-1 noise").
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np
import pyarrow as pa
from scipy.special import ndtr

from ...errors import InternalError
from ...privacy.budget import Budget
from ...privacy.mad import (
    adaptive_threshold,
    biased_novelty,
    check_beta_max,
    check_beta_min,
    check_confidence,
    check_degree,
    check_degrees,
    check_excess,
    check_split,
    reroute_fraction,
)
from ...stages.base import Engine, Frame, Rule
from ..base import Mechanism, Param, Params, Round, RoundPlan
from ..basic import composed_gaussian_rounds, gaussian_round
from ..guarantee import RoundGuarantee, basic_bound

_SHARED = (
    Param("adaptive_excess", 3.0, "b in the adaptive threshold τ = T + b·σ (spec §5)", check_excess),
    Param("adaptive_min_degree", 2, "Δ_min: users with fewer kept keys are not adaptive (spec §5)",
          lambda v: check_degree("adaptive_min_degree", v)),
    Param("max_adaptive_degree", None, "Δ_max: users with more kept keys are not adaptive (default Δ0; spec §5)",
          lambda v: check_degree("max_adaptive_degree", v)),
)


@dataclass(frozen=True)
class MadRound:
    """A MAD round's own plan: τ, f, the adaptive degrees and biases (spec §5); MAD2R's second
    round also the round-1 confidence widths c_L·σ1 (`lower`) and c_U·σ1 (`upper`) (spec §6)."""

    tau: float
    reroute: float
    min_degree: int
    max_degree: int
    beta_min: float
    beta_max: float
    lower: float | None = None
    upper: float | None = None


def _mad_round(plan: RoundPlan, params: Params, beta_min: float = 1.0, beta_max: float = 1.0,
               requested_f: float | None = None, lower: float | None = None,
               upper: float | None = None) -> RoundPlan:
    """One MAD round on a Gaussian round's σ, T (T with ρ(k) = β_max/√k, §2, Lemma 5.4): τ = T + bσ, f (§5)."""
    # Default Δ_max = Δ0; when Δ0 < Δ_min no user can be adaptive and Δ_max only sets f (spec §5).
    max_degree = params["max_adaptive_degree"] or max(params.delta0, params["adaptive_min_degree"])
    check_degrees(params["adaptive_min_degree"], max_degree)
    return replace(plan, extra=MadRound(
        tau=adaptive_threshold(plan.threshold, plan.scale, params["adaptive_excess"], beta_max),
        reroute=reroute_fraction(requested_f, beta_min, beta_max, max_degree),
        min_degree=params["adaptive_min_degree"], max_degree=max_degree, beta_min=beta_min, beta_max=beta_max,
        lower=lower, upper=upper))


def _mad_guarantee(plan: RoundPlan, params: Params, bound: bool) -> RoundGuarantee:
    """MAD dominates Basic with the same σ, T (Chen et al. ICML 2025 Thm 6.1; spec §7):
    P ≥ min(P_Basic, Φ(b)); a MAD2R second round has only the Basic numbers as a reference."""
    basic = basic_bound(plan, 0.5)
    weighting = basic.weighting + f" (Basic); MAD reroutes excess weight and truncates at τ = {plan.extra.tau:.5g}"
    if not bound:
        return RoundGuarantee("reference", weighting, basic.probability, [
            ("this round drops keys released in round 0 or with a round-0 upper bound below T and down-weights "
            f"keys with a high lower bound (β ≥ {plan.extra.beta_min:g}): no bound")])
    cap, basic_probability = float(ndtr(params["adaptive_excess"])), basic.probability
    if basic_probability is None:
        raise InternalError("invariant failed: MAD noise is Gaussian")
    return RoundGuarantee("bound", weighting, lambda n, k: np.minimum(basic_probability(n, k), cap),
                          [f"MAD dominates Basic (Thm 6.1, spec §7): P ≥ min(P_Basic, Φ(b) = {cap:.4f})"])


def unbiased_vectors(stages: Engine, own: ModuleType, pairs: Frame, max_contributions: int) -> Frame:
    """Stored kept (user, key) pairs with d_u and w^u_i = 1/√d_u (§2 step 1, §4), from the sized
    pairs (stored or not), truncated to Δ0 with a fresh salt (`own`: the family's stages on this engine)."""
    return own.mad_vectors(stages, stages.truncate(pairs, max_contributions))


def screen_round1(weights: np.ndarray, noisy: np.ndarray, plan1: RoundPlan, plan2: RoundPlan) -> dict:
    """MAD2R's decisions from ŵ1 (spec §6), per key of the universe (weights NaN off the support).

    O1 = support keys with ŵ1 ≥ T1; round 2 keeps keys (a) not in O1 and (b) with U_i = ŵ1 + c_U σ1
    ≥ T2; (c) β_i = τ2/L_i where L_i = ŵ1 − c_L σ1 > τ2, else 1. Every decision is a function of ŵ1
    alone, hence identical on neighbouring inputs; ŵ1 itself is never released.
    """
    released = ~np.isnan(weights) & (noisy >= plan1.threshold)
    round2 = ~released & (noisy + plan2.extra.upper >= plan2.threshold)
    low = noisy - plan2.extra.lower
    tau2 = plan2.extra.tau
    beta = np.where(low > tau2, tau2 / np.where(low > tau2, low, 1.0), 1.0)
    return {"_dp_released": released, "_dp_round2": round2, "_dp_beta": beta}


SCREEN_COLUMNS = {"_dp_released": "boolean", "_dp_round2": "boolean", "_dp_beta": "double"}


def screen_exceptions(plan1: RoundPlan, plan2: RoundPlan) -> Rule:
    """`screen_round1` as the rule of the generic `decide` stage, keeping only the exceptions (released,
    removed or biased keys): every other key of the universe goes to round 2 unbiased."""
    def rule(weights: np.ndarray, noisy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        decided = screen_round1(weights, noisy, plan1, plan2)
        return ~decided["_dp_round2"] | (decided["_dp_beta"] < 1), decided
    return rule


class Mad(Mechanism):
    name = "mad"
    citation = "Chen, Cohen-Addad, Epasto, Zadimoghaddam, ICML 2025, Alg. 3, Cor. 5.2 (spec docs/specs/mad-mad2r.md §5)"
    summary = ("Basic's noise and threshold; weight far above τ = T + bσ is truncated, returned to users "
               "and partly rerouted to their other keys.")
    params = _SHARED + (
        Param("reroute_fraction", None, "f; default and maximum β_min(1/√Δ_max − 1/(2Δ_max)) (spec §5)"),
    )

    exponent = 0.5

    def explain_round(self, index: int, plan: RoundPlan, params: Params) -> RoundGuarantee:
        return _mad_guarantee(plan, params, bound=True)

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        max_contributions = params.delta0
        plan = gaussian_round(budget, max_contributions)                      # ρ(k) = 1/√k (Lemma 5.4)
        return [_mad_round(plan, params, requested_f=params["reroute_fraction"])]

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        (round_plan,) = plan
        own = self.own_stages(stages)
        # the pairs are read once, by the truncation: not stored (one query fewer, no copy held while weighting)
        vectors = unbiased_vectors(stages, own, stages.sized(stages.round_pairs()), params.delta0)
        table = stages.output(stages.release(own.mad_weights(stages, vectors, round_plan), round_plan))
        return table, [Round.from_plan(0, round_plan, stages.num_rows(table))]


class Mad2R(Mechanism):
    name = "mad2r"
    citation = "Chen, Cohen-Addad, Epasto, Zadimoghaddam, ICML 2025, Alg. 4, Thm 5.1 (spec docs/specs/mad-mad2r.md §6)"
    summary = ("Unbiased MAD on a share α of the budget, then biased MAD on the rest after removing found "
               "keys and hopeless keys and down-weighting keys already far above the threshold.")
    params = _SHARED + (
        Param("split", 0.1, "α: round 1 gets (αε, αδ) or (αρ, αδ), round 2 the rest (spec §6, §8)", check_split),
        Param("c_lower", 3.0, "c_L: lower bound L_i = ŵ1_i − c_L·σ1 sets biases (spec §6)",
              lambda v: check_confidence("c_lower", v)),
        Param("c_upper", 3.0, "c_U: keys with ŵ1_i + c_U·σ1 < T2 are dropped (spec §6)",
              lambda v: check_confidence("c_upper", v)),
        Param("beta_min", 0.5, "β_min: smallest bias (spec §4, §8)", check_beta_min),
        Param("beta_max", 1.2, "β_max: largest weight multiple of 1/√d (spec §4, §8)", check_beta_max),
    )

    exponent = 0.5

    def explain_round(self, index: int, plan: RoundPlan, params: Params) -> RoundGuarantee:
        return _mad_guarantee(plan, params, bound=index == 0)

    def explain_overall(self, rounds: list[RoundGuarantee]) -> tuple[Callable | None, list[str]]:
        return rounds[0].probability, [("guarantee from round 0 alone (the whole release is at least as likely); "
                                       "round 1 usually releases most keys, near its reference numbers")]

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        max_contributions = params.delta0
        # Both rounds have ℓ2 sensitivity 1 (Lemma 5.8), composed exactly with shares α, 1 − α (spec §6).
        alpha = params["split"]
        rounds = composed_gaussian_rounds(budget, [alpha, 1 - alpha], max_contributions,
                                          [biased_novelty(1.0), biased_novelty(params["beta_max"])])
        plan1 = _mad_round(rounds[0], params)                # unbiased MAD, ρ(k) = 1/√k
        plan2 = _mad_round(rounds[1], params, params["beta_min"], params["beta_max"],
                           lower=params["c_lower"] * plan1.scale, upper=params["c_upper"] * plan1.scale)
        return [plan1, plan2]

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        plan1, plan2 = plan
        max_contributions = params.delta0
        own = self.own_stages(stages)
        pairs = stages.store(stages.sized(stages.round_pairs()), "pairs")   # read from the input once
        vectors1 = unbiased_vectors(stages, own, pairs, max_contributions)
        # round-1 noise of keys no user kept drawn when needed (engines may, where it pays)
        lazy = own.mad2r_lazy(stages, pairs, max_contributions, plan1, plan2)
        status, late = own.mad2r_screen(stages, pairs, vectors1, plan1, plan2, max_contributions, lazy)
        salt = stages.randomness.salt()                                  # round 2's truncation
        cuts = None if late is None else \
            own.noise_late(stages, pairs, vectors1, status, late, plan2, max_contributions, salt)
        stages.drop(vectors1)                                            # free memory before round 2
        first = stages.num_rows(stages.output(own.mad2r_released(stages, status)))
        vectors2 = own.mad2r_vectors(stages, pairs, status, max_contributions, plan2.extra.beta_min,
                                     plan2.extra.beta_max, salt, cuts)
        if cuts is not None:
            stages.drop(cuts)
        second = stages.release(own.mad_weights(stages, vectors2, plan2), plan2)
        table = stages.output(stages.union(own.mad2r_released(stages, status), second))   # one sorted output
        return table, [Round.from_plan(0, plan1, first),
                       Round.from_plan(1, plan2, stages.num_rows(table) - first)]
