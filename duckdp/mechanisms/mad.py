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

Each stage is SQL: sql/mad_pairs.sql (distinct pairs with each user's key count) and
sql/mad_bounded.sql / mad2r_bounded.sql + mad2r_biased.sql (user vectors), both materialised;
sql/mad_weights.sql (stages 1–4); the shared noise stage (duckdp/noise_stage.py: noise and threshold);
sql/mad2r_universe.sql + screen_round1 (streamed batch by batch through the noise stage) + sql/mad2r_status.sql
(round-1 noisy weights on the whole universe and round-2 preprocessing, storing only the keys released,
removed or biased).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..noise_stage import release_keys, scan_noisy
from ..privacy.mad import (adaptive_threshold, biased_novelty, check_beta_max, check_beta_min, check_confidence,
                           check_degree, check_degrees, check_excess, check_split, reroute_fraction)
from ..templates import quote_ident
from .base import Mechanism, Param, Round, RoundPlan
from .basic import composed_gaussian_rounds, gaussian_round

_SHARED = (
    Param("adaptive_excess", 3.0, "b in the adaptive threshold τ = T + b·σ (spec §5)", check_excess),
    Param("adaptive_min_degree", 2, "Δ_min: users with fewer kept keys are not adaptive (spec §5)",
          lambda v: check_degree("adaptive_min_degree", v)),
    Param("max_adaptive_degree", None, "Δ_max: users with more kept keys are not adaptive (default Δ0; spec §5)",
          lambda v: check_degree("max_adaptive_degree", v)),
)


def _mad_round(plan: RoundPlan, max_contributions: int, params: dict, beta_min: float = 1.0, beta_max: float = 1.0,
               requested_f=None) -> RoundPlan:
    """One MAD round on a Gaussian round's σ, T (T with ρ(k) = β_max/√k, §2, Lemma 5.4): τ = T + bσ, f (§5)."""
    # Default Δ_max = Δ0; when Δ0 < Δ_min no user can be adaptive and Δ_max only sets f (spec §5).
    max_degree = params["max_adaptive_degree"] or max(max_contributions, params["adaptive_min_degree"])
    check_degrees(params["adaptive_min_degree"], max_degree)
    plan.extra.update(
        tau=adaptive_threshold(plan.threshold, plan.scale, params["adaptive_excess"], beta_max),
        reroute=reroute_fraction(requested_f, beta_min, beta_max, max_degree),
        min_degree=params["adaptive_min_degree"], max_degree=max_degree, beta_min=beta_min, beta_max=beta_max)
    return plan


def distinct_pairs(ctx, target: str) -> None:
    """Create TEMP table `target`: the input's distinct (user, key) pairs with each user's key count
    `_dp_size` (read once; the input is only read)."""
    base = ctx.base_idents()
    ctx.execute("mad_pairs", {"target": target, "source": base["source"], "user": base["user"],
                              "key_select": base["key_select"]}, {})


def unbiased_vectors(ctx, target: str, pairs: str, max_contributions: int) -> None:
    """Create TEMP table `target`: kept (user, key) pairs with d_u and w^u_i = 1/√d_u (§2 step 1, §4)."""
    ctx.execute("mad_bounded", {"target": target, "pairs": pairs, "keys": ctx.key_aliases},
                {"max_contributions": max_contributions, "trunc_salt": ctx.randomness.salt()})


def biased_vectors(ctx, target: str, pairs: str, status: str, max_contributions: int, beta_min: float,
                   beta_max: float) -> None:
    """Create TEMP table `target`: round-2 pairs (keys of `status` rows have `_dp_round2`, the others
    stay), re-cut to Δ0, with the UserWeights vector of the keys' `_dp_beta` biases (§4, §6): 1/√d for
    users without a bias below 1, water-filling for the rest."""
    ctx.execute("mad2r_bounded", {"target": target, "pairs": pairs, "keys": ctx.key_aliases, "status": status},
                {"max_contributions": max_contributions, "trunc_salt": ctx.randomness.salt(), "beta_min": beta_min})
    ctx.execute("mad2r_biased", {"target": target, "keys": ctx.key_aliases, "match": ctx.key_match("t", "s")},
                {"beta_max": beta_max})


def weights_query(ctx, bounded: str, plan: RoundPlan) -> tuple[str, dict]:
    """SQL (keys, _dp_w) of MAD's pre-noise weights over user vectors `bounded` (§5 stages 1–4)."""
    x = plan.extra
    return ctx.render("mad_weights", {"bounded": bounded, "keys": ctx.key_aliases},
                      {"min_degree": x["min_degree"], "max_degree": x["max_degree"], "tau": x["tau"],
                       "reroute": x["reroute"]})


def release(ctx, bounded: str, plan: RoundPlan) -> pa.Table:
    """The keys whose MAD weight plus fresh noise clears T (§2 step 5, the shared noise stage)."""
    text, bound = weights_query(ctx, bounded, plan)
    return release_keys(ctx, text, bound, plan, ctx.key_output)


def screen_round1(weights: np.ndarray, noisy: np.ndarray, plan1: RoundPlan, plan2: RoundPlan) -> dict:
    """MAD2R's decisions from ŵ1 (spec §6), per key of the universe (weights NaN off the support).

    O1 = support keys with ŵ1 ≥ T1; round 2 keeps keys (a) not in O1 and (b) with U_i = ŵ1 + c_U σ1
    ≥ T2; (c) β_i = τ2/L_i where L_i = ŵ1 − c_L σ1 > τ2, else 1. Every decision is a function of ŵ1
    alone, hence identical on neighbouring inputs; ŵ1 itself is never released.
    """
    released = ~np.isnan(weights) & (noisy >= plan1.threshold)
    round2 = ~released & (noisy + plan2.extra["upper"] >= plan2.threshold)
    low = noisy - plan2.extra["lower"]
    tau2 = plan2.extra["tau"]
    beta = np.where(low > tau2, tau2 / np.where(low > tau2, low, 1.0), 1.0)
    return {"_dp_released": released, "_dp_round2": round2, "_dp_beta": beta}


def _exceptions(weights: np.ndarray, noisy: np.ndarray, plan1: RoundPlan, plan2: RoundPlan):
    """The rows MAD2R stores between the rounds (released, removed or biased) and their decisions;
    every other key goes to round 2 with β = 1."""
    decided = screen_round1(weights, noisy, plan1, plan2)
    return ~decided["_dp_round2"] | (decided["_dp_beta"] < 1), decided


class Mad(Mechanism):
    name = "mad"
    citation = "Chen, Cohen-Addad, Epasto, Zadimoghaddam, ICML 2025, Alg. 3, Cor. 5.2 (spec docs/specs/mad-mad2r.md §5)"
    summary = ("Basic's noise and threshold; weight far above τ = T + bσ is truncated, returned to users "
               "and partly rerouted to their other keys.")
    params = _SHARED + (
        Param("reroute_fraction", None, "f; default and maximum β_min(1/√Δ_max − 1/(2Δ_max)) (spec §5)"),
    )

    def plan(self, budget, max_contributions, params):
        plan = gaussian_round(budget, max_contributions)                      # ρ(k) = 1/√k (Lemma 5.4)
        return [_mad_round(plan, max_contributions, params, requested_f=params["reroute_fraction"])]

    def run(self, ctx, plan, params):
        (round_plan,) = plan
        pairs, bounded = ctx.temp_table("pairs"), ctx.temp_table("bounded")
        distinct_pairs(ctx, pairs)
        unbiased_vectors(ctx, bounded, pairs, params["max_contributions"])
        table = release(ctx, bounded, round_plan)
        return table, [Round.from_plan(0, round_plan, table.num_rows)]


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

    def plan(self, budget, max_contributions, params):
        # Both rounds have ℓ2 sensitivity 1 (Lemma 5.8), composed exactly with shares α, 1 − α (spec §6).
        alpha = params["split"]
        rounds = composed_gaussian_rounds(budget, [alpha, 1 - alpha], max_contributions,
                                          [biased_novelty(1.0), biased_novelty(params["beta_max"])])
        plan1 = _mad_round(rounds[0], max_contributions, params)                # unbiased MAD, ρ(k) = 1/√k
        plan2 = _mad_round(rounds[1], max_contributions, params, params["beta_min"], params["beta_max"])
        plan2.extra.update(lower=params["c_lower"] * plan1.scale, upper=params["c_upper"] * plan1.scale)
        return [plan1, plan2]

    def run(self, ctx, plan, params):
        plan1, plan2 = plan
        max_contributions = params["max_contributions"]
        pairs, bounded1, status, bounded2 = (ctx.temp_table(t) for t in ("pairs", "bounded1", "status", "bounded2"))
        distinct_pairs(ctx, pairs)
        unbiased_vectors(ctx, bounded1, pairs, max_contributions)
        weighted, bound = weights_query(ctx, bounded1, plan1)
        universe, bound = ctx.render("mad2r_universe", {"weighted": weighted, "pairs": pairs, "keys": ctx.key_aliases},
                                     bound | {"max_contributions": max_contributions})
        exceptions = scan_noisy(ctx, universe, bound, plan1.noise, plan1.scale,
                                lambda w, noisy: _exceptions(w, noisy, plan1, plan2), ctx.key_aliases)
        ctx.execute("mad2r_status", {"target": status, "universe": universe, "keys": ctx.key_aliases}, bound)
        view = f"_duckdp_{ctx.run_id}_exceptions"
        ctx.con.register(view, exceptions)
        try:
            ctx.con.execute(f"INSERT INTO temp.main.{status} BY NAME SELECT * FROM {quote_ident(view)}")
        finally:
            ctx.con.unregister(view)
        del exceptions
        ctx.con.execute(f"DROP TABLE temp.main.{bounded1}")                    # free memory before round 2
        first = ctx.arrow("mad2r_released", {"status": status, "key_output": ctx.key_output}, {})
        biased_vectors(ctx, bounded2, pairs, status, max_contributions, plan2.extra["beta_min"],
                       plan2.extra["beta_max"])
        second = release(ctx, bounded2, plan2)
        table = pa.concat_tables([first, second.cast(first.schema)])
        return table, [Round.from_plan(0, plan1, first.num_rows), Round.from_plan(1, plan2, second.num_rows)]
