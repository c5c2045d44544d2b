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
     adversarial inputs; float rounding, ~1e-16 relative, is covered by σ's 1e-12 round-up). This needs step 4's rule: the state must come from a noisy weight of every
     key still in play. Were keys outside the last round's support treated as dropped, u keeping a
     key in R̃_u would change that key's state, hence other users' vectors (tests pin this trap).
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

SQL: sql/adaptive_sips_pairs.sql (pairs and empty state), adaptive_sips_first.sql / _remaining.sql
(step 1: round 1 reads the pairs alone, later rounds join the state), adaptive_sips_vectors.sql (2–3),
adaptive_sips_round.sql (steps 4–6: the next state); the last round needs no state, so it noises only
∪R̃_u (adaptive_sips_weights.sql, sql/basic.sql); adaptive_sips_output.sql / _counts.sql.
"""
from __future__ import annotations

import math
import numbers

from ..errors import InvalidParameter
from ..privacy.budget import split_exact
from ..privacy.calibration import capped_l2_novelty, gaussian_threshold
from ..privacy.composition import gaussian_rounds
from ..privacy.mad import check_beta_min
from .base import Mechanism, Param, Round, RoundPlan
from .basic import pairs_query, release_query
from .dpsips import _check_iterations, _check_ratio, round_shares


def _check_z(name: str):
    def check(value) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise InvalidParameter(f"{name} must be a finite number (in units of the round's σ), got {value!r}")
        return float(value)
    return check


def round_caps(iterations: int, beta_min: float) -> list[float]:
    """c_j: 1 in round 1 (all levels 1), 1/β_min after (spec, "The mechanism")."""
    return [1.0] + [1.0 / beta_min] * (iterations - 1)


def round_plans(budget, max_contributions: int, shares: list[float], caps: list[float]) -> list[RoundPlan]:
    """σ_j from the exact composition of the Gaussian rounds (privacy.composition.gaussian_rounds:
    zCDP σ_j = 1/√(2ρ_j), Bun & Steinke Prop. 1.6; (ε, δ): jointly μ-GDP, Dong, Roth & Su 2022
    Cor. 3.3, μ at (ε, δ/2)); T_j = max_k [c_j/√k + σ_j Φ⁻¹((1−δ_j)^{1/k})] with the round's novel-key
    δ_j (Gopi et al. Thm 5.1 with ρ(k) = c_j/√k; DP-SIPS Alg. 2, Thm 13). Each round's `budget` is its
    share of the request (they sum to it exactly), what ledgers add up."""
    composed = gaussian_rounds(budget, shares)
    plans = []
    for part, share, cap, sigma, novel in zip(split_exact(budget, shares), shares, caps, composed.sigmas,
                                              composed.novel_deltas):
        threshold = gaussian_threshold(sigma, novel, max_contributions, capped_l2_novelty(cap))
        plans.append(RoundPlan(part, "gaussian", sigma, threshold,
                               {"share": share, "cap": cap, "mu": 1 / sigma, "novel_delta": novel,
                                "joint_mu": composed.mu}))
    return plans


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

    def check_params(self, given):
        params = super().check_params(given)
        if params["a_drop"] > params["a_full"]:
            raise InvalidParameter(f"a_drop={params['a_drop']:g} must not exceed a_full={params['a_full']:g}")
        return params

    def plan(self, budget, max_contributions, params):
        shares = round_shares(params["iterations"], params["ratio"])
        caps = round_caps(params["iterations"], params["beta_min"])
        return round_plans(budget, max_contributions, shares, caps)

    def run(self, ctx, plan, params):
        pairs, state = setup_tables(ctx)
        for j, round_plan in enumerate(plan[:-1]):
            state = run_round(ctx, pairs, state, round_plan, params, j)
        counts = dict(ctx.sql("adaptive_sips_counts", {"state": state}, {}).fetchall())
        last, bound = last_round_query(ctx, pairs, state, plan[-1], params["max_contributions"], len(plan) == 1)
        table = ctx.sql("adaptive_sips_output", {"state": state, "key_output": ctx.key_output, "last": last},
                        bound).to_arrow_table()
        counts[len(plan) - 1] = table.num_rows - sum(counts.values())
        return table, [Round.from_plan(j, p, int(counts.get(j, 0))) for j, p in enumerate(plan)]


def setup_tables(ctx) -> tuple[str, str]:
    """Create the run's TEMP tables: distinct pairs (read once) and the empty per-key state."""
    pairs, state = ctx.temp_table("pairs"), ctx.temp_table("state")
    distinct, _ = pairs_query(ctx)
    ctx.execute("adaptive_sips_pairs", {"pairs": pairs, "state": state, "distinct": distinct,
                                        "keys": ctx.key_aliases}, {})
    return pairs, state


def vectors_query(ctx, pairs: str, state: str, max_contributions: int, cap: float, first: bool) -> tuple[str, dict]:
    """SQL of steps 1–3: every pair of R_u with the entry x_ui of its user's vector (0 off R̃_u).
    Round 1 (`first`) reads the pairs alone: nothing is out of play yet and every level is 1."""
    if first:
        remaining, _ = ctx.render("adaptive_sips_first", {"pairs": pairs}, {})
    else:
        remaining, _ = ctx.render("adaptive_sips_remaining", {"pairs": pairs, "state": state,
                                                              "match": ctx.key_match("p", "s")}, {})
    return ctx.render("adaptive_sips_vectors", {"remaining": remaining, "keys": ctx.key_aliases},
                      {"max_contributions": max_contributions, "trunc_salt": ctx.randomness.salt(), "cap": cap})


def last_round_query(ctx, pairs: str, state: str, plan: RoundPlan, max_contributions: int,
                     first: bool) -> tuple[str, dict]:
    """SQL of the last round's released keys: steps 1–5 with noise on ∪R̃_u only (no later round reads
    a state, so the other keys' noise would be unused), through basic.release_query."""
    vectors, bound = vectors_query(ctx, pairs, state, max_contributions, plan.extra["cap"], first)
    weights = ctx.render("adaptive_sips_weights", {"vectors": vectors, "keys": ctx.key_aliases}, bound)
    return release_query(ctx, weights, plan, ctx.key_output)


def run_round(ctx, pairs: str, state: str, plan: RoundPlan, params: dict, index: int) -> str:
    """Steps 1–6 of round `index`; returns the TEMP table of the next state (the old one is dropped)."""
    vectors, bound = vectors_query(ctx, pairs, state, params["max_contributions"], plan.extra["cap"], index == 0)
    nxt = ctx.temp_table("state")
    ctx.execute("adaptive_sips_round",
                {"next": nxt, "state": state, "vectors": vectors, "keys": ctx.key_aliases,
                 "noise": ctx.noise.name(plan.noise)},
                bound | {"scale": plan.scale, "noise_salt": ctx.randomness.salt(), "threshold": plan.threshold,
                         "a_drop": params["a_drop"], "a_full": params["a_full"], "beta_min": params["beta_min"],
                         "round": index})
    ctx.con.execute(f"DROP TABLE temp.main.{state}")
    return nxt
