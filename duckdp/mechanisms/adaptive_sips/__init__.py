"""Adaptive SIPS: DP-SIPS rounds in which users steer weight with earlier rounds' noisy weights.

A mechanism of ours (docs/specs/adaptive-sips.md), built on DP-SIPS (Swanberg, Desfontaines, Haney,
PoPETs 2023, Alg. 3). Round j (budget share r^{I−j}(1−r)/(1−r^I), σ_j) reads per-key public state:
released O, Dropped, level ∈ {β_min, 1} (1 everywhere in round 1), and
  1. R_u = S_u \\ (O ∪ Dropped);  2. R̃_u = a uniform min(|R_u|, Δ0)-subset (keyed hash, fresh salt);
  3. x_u = R̃_u's levels scaled to unit ℓ2 norm, capped at c/√d (d = |R̃_u|, c = 1 in round 1 and
     1/β_min later), the capped mass re-spread over the rest (water-filling), a final clip;
  4. w = Σ_u x_u and ŵ = w + N(0, σ_j²) on EVERY key of ∪_u R_u (also keys no user kept);
  5. O_j = {i ∈ ∪_u R̃_u : ŵ_i ≥ T_j}, T_j = max_{k≤Δ0} [c/√k + σ_j Φ⁻¹((1−δ_j)^{1/k})];
  6. z = ŵ/σ_j: Dropped ∪= {z < a_drop}; level = 1 if z ≥ a_full else β_min.
The output is O = ∪_j O_j (keys only); ŵ, levels and Dropped are never output.

Privacy (user-level add/remove neighbours D, D' = D + u):
  1. Sensitivity. Condition on the state after round j−1, viewed over the whole key universe (a key
     nobody holds has a pure-noise ŵ). Every user's R_u, R̃_u and x_u are functions of their own S_u,
     that state and their own truncation coins, so w(D') − w(D) = x_u, and step 3 keeps ‖x_u‖₂ ≤ 1:
     the round is a Gaussian mechanism of ℓ2 sensitivity 1 (tested: norms and caps on random and
     adversarial inputs; float rounding, ~1e-16 relative, is covered by σ's 1e-12 round-up). This
     needs step 4's rule: the state must come from a noisy weight of every key still in play. Were
     keys outside the last round's support treated as dropped, u keeping a key in R̃_u would change
     that key's state, hence other users' vectors (tests pin this trap).
  2. Novel keys. A key only u holds gets x_ui ≤ c/√d ≤ c/√k, k ≤ d the number of u's novel keys in
     R̃_u, so with T_j above P(some novel key crosses T_j) ≤ δ_j (Gopi et al. ICML 2020, Thm 5.1 with
     ρ(k) = c/√k; DP-SIPS Thm 13). Off the novel keys, round j is the Gaussian mechanism of step 1.
  3. Composition. zCDP: round j is δ_j-approximate ρ_j-zCDP with σ_j = 1/√(2ρ_j) (Bun & Steinke
     2016, Prop. 1.6); adaptive composition adds ρ_j (Lemma 2.3) and a union bound adds δ_j (DP-SIPS
     Thm 14), with Σρ_j = ρ and Σδ_j = δ exactly (privacy.budget.split_exact).
     (ε, δ): the rounds are Gaussian mechanisms of sensitivity 1 composed adaptively, exactly μ-GDP
     with μ = √(Σ 1/σ_j²) (Dong, Roth & Su 2022, Cor. 3.3); μ is calibrated to (ε, δ/2) by the
     analytic Gaussian (Balle & Wang 2018 Thm 8 = Dong et al. Cor. 2.13), σ_j⁻² = share_j·μ², and the
     novel-key events get δ_j = share_j·δ/2 (union bound). privacy/composition.py holds that math.
The last steps (release, drop, levels) are post-processing of ŵ and the threshold bit.

Stages (the engine's generic stages and this folder's own, duckdb.py with ./sql and spark.py; DuckDB
SQL in brackets): the input's distinct pairs, stored once; per round step 1 [adaptive_sips_first.sql
/ adaptive_sips_remaining.sql: R_u with each key's level], step 2 the shared truncation stage (sized
→ truncate: R̃_u, d), step 3 [adaptive_sips_vectors.sql; round 1, uniform 1/√d:
adaptive_sips_vectors_uniform.sql], step 4 [adaptive_sips_weights.sql; rounds
whose state a later round reads: adaptive_sips_universe.sql, every key of ∪R_u, from the pairs in
round 1 (adaptive_sips_in_play_first.sql) and from the state after (adaptive_sips_in_play.sql)] and
the noise stage, steps 5–6 `next_state` (numpy, engine-neutral, through the generic `decide` stage) stored as the
next state [adaptive_sips_state.sql]; the last round needs no state, so it noises only ∪R̃_u through
the shared release stage. The output is the state's released keys [adaptive_sips_released.sql] ∪ the
last round's. Engines may draw step 4's noise on keys no user kept lazily, when a later truncation
needs their state (`own.lazy_rounds`; DuckDB on integer keys and key ids: duckdb.py), with the same
release (docs/specs/adaptive-sips.md, "Lazy noise").
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import InvalidParameter
from ...privacy.budget import Budget, split_exact
from ...privacy.calibration import capped_l2_novelty, gaussian_threshold
from ...privacy.composition import gaussian_rounds
from ...privacy.mad import check_beta_min
from ...stages.base import Engine, Frame, Rule
from ...validation import not_above
from ..base import Mechanism, Param, Params, Round, RoundPlan
from ..dpsips import _check_iterations, _check_ratio, round_shares
from ..guarantee import RoundGuarantee, noise_probability, weighting_text


def _check_z(name: str) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise InvalidParameter(f"{name} must be a finite number (in units of the round's σ), got {value!r}")
        return float(value)
    return check


@dataclass(frozen=True)
class AdaptiveRound:
    """An adaptive SIPS round's share of the budget and its cap c (novel sensitivity c/√k)."""

    share: float
    cap: float


def round_caps(iterations: int, beta_min: float) -> list[float]:
    """c_j: 1 in round 1 (all levels 1), 1/β_min after (spec, "The mechanism")."""
    return [1.0] + [1.0 / beta_min] * (iterations - 1)


def round_plans(budget: Budget, max_contributions: int, shares: list[float], caps: list[float]) -> list[RoundPlan]:
    """σ_j from the exact composition of the Gaussian rounds (privacy.composition.gaussian_rounds:
    zCDP σ_j = 1/√(2ρ_j), Bun & Steinke Prop. 1.6; (ε, δ): jointly μ-GDP, Dong, Roth & Su 2022
    Cor. 3.3, μ at (ε, δ/2)); T_j = max_k [c_j/√k + σ_j Φ⁻¹((1−δ_j)^{1/k})] with the round's novel-key
    δ_j (Gopi et al. Thm 5.1 with ρ(k) = c_j/√k; DP-SIPS Alg. 2, Thm 13). Each round's `budget` is its
    share of the request (they sum to it exactly), what ledgers add up; ℓ2 sensitivity 1 (step 3)."""
    composed = gaussian_rounds(budget, shares)
    plans = []
    for part, share, cap, sigma, novel in zip(split_exact(budget, shares), shares, caps, composed.sigmas,
                                              composed.novel_deltas, strict=True):
        threshold = gaussian_threshold(sigma, novel, max_contributions, capped_l2_novelty(cap))
        plans.append(RoundPlan(part, "gaussian", sigma, threshold, AdaptiveRound(share, cap),
                               sensitivity=1.0, novel_delta=novel, mu=1.0 / sigma))
    return plans


def next_state(weights: np.ndarray, noisy: np.ndarray, plan: RoundPlan,
               params: Params) -> tuple[np.ndarray, np.ndarray]:
    """Steps 5–6 on every key of ∪_u R_u (weights NaN off ∪R̃_u): (released, level). O_j = keys of ∪R̃_u
    with ŵ ≥ T_j; z = ŵ/σ_j: level 0 (out of play) if released or z < a_drop, 1 if z ≥ a_full, else
    β_min. A function of ŵ and the threshold bit only (post-processing)."""
    released = ~np.isnan(weights) & (noisy >= plan.threshold)
    z = noisy / plan.scale
    level = np.where(released | (z < params["a_drop"]), 0.0, np.where(z >= params["a_full"], 1.0, params["beta_min"]))
    return released, level


STATE_COLUMNS = {"_dp_level": "double", "_dp_released": "boolean"}


def state_rule(plan: RoundPlan, params: Params, keep_out: bool = False) -> Rule:
    """`next_state` as the rule of the generic `decide` stage: keys still in play or released this round
    get a state row (`_dp_level`, `_dp_released`); with `keep_out` dropped keys too (level 0: lazy
    noise tells them from keys not noised yet)."""
    def rule(weights: np.ndarray, noisy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        released, level = next_state(weights, noisy, plan, params)
        keep = np.ones(level.size, bool) if keep_out else (level > 0) | released
        return keep, {"_dp_level": level, "_dp_released": released}
    return rule


class AdaptiveSIPS(Mechanism):
    name = "adaptive_sips"
    citation = ("duckdp's adaptive SIPS (docs/specs/adaptive-sips.md) on DP-SIPS (Swanberg et al., PoPETs 2023, "
                "Alg. 3, Thm 14) with Gopi et al. ICML 2020 Thm 5.1 thresholds")
    summary = ("DP-SIPS rounds in which each user drops keys whose previous noisy weight looked hopeless and "
               "gives uncertain keys a smaller level, capped at c/√d so novel keys stay under the threshold.")
    params = (
        Param("iterations", 3, "number of rounds I", _check_iterations),
        Param("ratio", 1 / 3, "budget ratio r between rounds j and j+1 (1 = even split)", _check_ratio),
        Param("a_drop", -0.5, "drop keys whose noisy weight is below a_drop·σ_j", _check_z("a_drop")),
        Param("a_full", 0.5, "level 1 for keys at ≥ a_full·σ_j, β_min below", _check_z("a_full")),
        Param("beta_min", 0.5, "β_min ∈ (0, 1]: the smaller level; the cap is c = 1/β_min", check_beta_min),
    )

    exponent = 0.5

    def check_params(self, given: Mapping[str, Any]) -> Mapping[str, Any]:
        settings = super().check_params(given)
        not_above("a_drop", settings["a_drop"], "a_full", settings["a_full"])
        return settings

    def explain_round(self, index: int, plan: RoundPlan, params: Params) -> RoundGuarantee:
        """Round 0 is Weighted Gaussian (a bound); later rounds drop keys and lower levels from earlier
        noisy weights, so their numbers (a key at level 1 gets ≥ 1/√k from each holder) are a reference."""
        probability = noise_probability(plan.noise, plan.scale, plan.threshold, 0.5)
        if index == 0:
            return RoundGuarantee("bound", weighting_text(0.5) + " (all keys at level 1)", probability)
        return RoundGuarantee("reference", weighting_text(0.5) + " for a key at level 1", probability, [
            f"keys whose earlier noisy weight fell below a_drop·σ are dropped and keys below a_full·σ get level "
            f"β_min = {params['beta_min']:g}: no bound; T uses the cap c = {plan.extra.cap:g} "
            f"(novel sensitivity c/√k)"])

    def explain_overall(self, rounds: list[RoundGuarantee]) -> tuple[Callable | None, list[str]]:
        if len(rounds) == 1:
            return rounds[0].probability, []
        return rounds[0].probability, [("guarantee from round 0 alone (the whole release is at least as likely); "
                                       "later rounds usually release most keys, near the reference numbers")]

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        shares = round_shares(params["iterations"], params["ratio"])
        caps = round_caps(params["iterations"], params["beta_min"])
        return round_plans(budget, params.delta0, shares, caps)

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        max_contributions = params.delta0
        own = self.own_stages(stages)
        pairs = stages.store(stages.round_pairs(), "pairs")       # distinct pairs, read from the input once
        # every round's truncation salt, drawn up front in round order: only this loop draws salts in a run
        # (truncate takes them as given), so they are the values drawn round by round before; `remaining`
        # orders by its round's salt, and lazy noise's round 2 by every later round's too
        salts = [stages.randomness.salt() for _ in plan]
        lazy = own.lazy_rounds(stages, params, salts)  # noise of keys no user kept drawn when needed (engines may)
        state, rounds = None, []
        for j, round_plan in enumerate(plan[:-1]):
            salt = salts[j]
            remaining = own.remaining(stages, pairs, state, salt, lazy)
            vectors = round_vectors(stages, own, remaining, round_plan, max_contributions, salt, state is None)
            new, released = own.state(stages, remaining, vectors, state, round_plan, params, j, lazy)
            if state is not None:
                stages.drop(state)
            state = new
            rounds.append(Round.from_plan(j, round_plan, released))
        salt = salts[-1]
        remaining = own.remaining(stages, pairs, state, salt, lazy)
        last = stages.release(own.weights(stages, round_vectors(stages, own, remaining, plan[-1], max_contributions,
                                                                salt, state is None)), plan[-1])
        table = stages.output(last if state is None else stages.union(own.released(stages, state), last))
        released = stages.num_rows(table) - sum(r.released for r in rounds)
        rounds.append(Round.from_plan(len(plan) - 1, plan[-1], released))
        return table, rounds


def round_vectors(stages: Engine, own: ModuleType, remaining: Frame, plan: RoundPlan, max_contributions: int,
                  salt: int, first: bool = False) -> Frame:
    """Steps 2–3: R̃_u by the generic truncation stage under the round's fresh `salt` (drawn by `run`,
    which hands the same salt to `remaining`), then each user's capped vector (`own`: the family's stages
    on this engine). `first`: round 1, every level 1 and c = 1 (round_caps), so x_u is uniform 1/√d and
    the engine may skip the level counts (the same numbers)."""
    kept = stages.truncate(stages.sized(remaining), max_contributions, salt)
    return own.vectors(stages, kept, plan.extra.cap, first)
