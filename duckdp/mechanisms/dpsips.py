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

import numpy as np

from ..errors import InvalidParameter
from ..noise_stage import release_keys
from ..templates import quote_ident
from .base import Mechanism, Param, Round
from .basic import composed_gaussian_rounds, pairs_query, weights_query


def _check_iterations(value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidParameter(f"iterations must be an integer >= 1, got {value!r}")
    return int(value)


def _check_ratio(value) -> float:
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


class DPSIPS(Mechanism):
    name = "dpsips"
    citation = "Swanberg, Desfontaines, Haney, DP-SIPS (PoPETs 2023), Alg. 3, Thm 14"
    summary = ("Weighted Gaussian over I rounds with geometrically growing budgets; each round removes "
               "the keys already released and re-truncates every user's set.")
    params = (
        Param("iterations", 3, "number of rounds I", _check_iterations),
        Param("ratio", 1 / 3, "budget ratio r between rounds i and i+1 (1 = even split)", _check_ratio),
    )

    def plan(self, budget, max_contributions, params):
        # Alg. 2 rounds (Thm 13; Gopi et al. Thm 5.1) with Alg. 3's geometric shares, composed exactly.
        return composed_gaussian_rounds(budget, round_shares(params["iterations"], params["ratio"]),
                                        max_contributions)

    def run(self, ctx, plan, params):
        max_contributions = params["max_contributions"]
        pairs, released = setup_tables(ctx)
        rounds = []
        view = f"_duckdp_{ctx.run_id}_selected"
        for i, round_plan in enumerate(plan):
            text, bound = round_weights_query(ctx, pairs, released, max_contributions)
            selected = release_keys(ctx, text, bound, round_plan, ctx.key_aliases)
            ctx.con.register(view, selected)
            try:
                ctx.execute("dpsips_store", {"released": released, "selected": quote_ident(view),
                                             "keys": ctx.key_aliases}, {})
            finally:
                ctx.con.unregister(view)
            rounds.append(Round.from_plan(i, round_plan, selected.num_rows))
        table = ctx.arrow("dpsips_output", {"released": released, "key_output": ctx.key_output}, {})
        return table, rounds


def setup_tables(ctx) -> tuple[str, str]:
    """Create the run's TEMP tables: distinct pairs (read once) and the empty released-keys set."""
    pairs, released = ctx.temp_table("pairs"), ctx.temp_table("released")
    distinct, _ = pairs_query(ctx)
    ctx.execute("dpsips_pairs", {"pairs": pairs, "released": released, "distinct": distinct,
                                 "keys": ctx.key_aliases}, {})
    return pairs, released


def round_weights_query(ctx, pairs: str, released: str, max_contributions: int) -> tuple[str, dict]:
    """SQL of one round's weights: Basic 1/√|W̄| weights over the pairs whose key is not yet
    released (Alg. 3 line 9), re-truncated to Δ0 with a fresh salt."""
    remaining, _ = ctx.render("dpsips_remaining", {"pairs": pairs, "released": released,
                                                   "match": ctx.key_match("p", "r")}, {})
    return weights_query(ctx, max_contributions, 0.5, remaining)
