"""Sequential (greedy) mechanisms: Policy Laplace, Policy Gaussian (ℓ2- and ℓ1-descent) and GW.

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private Set Union" (journal
version, Alg. 1–8, Thm 4.1, 5.1); Carvalho, Wang, Gondara, "Incorporating item frequency for
differentially private set union" (AAAI 2022), as described in DP-SIPS §3.2.2.

Each user's update depends on every earlier user, so this cannot be one SQL query (nor a Spark job:
these mechanisms declare DuckDB as their only engine). DuckDB prepares
the data (pairs, truncation, dense item ids, per-user lists in keyed-hash user order; duckdb.py, ./sql) and streams
the lists in Arrow batches to a numpy loop over one weight array indexed by item id; the final
histogram goes back to the engine for keyed noise and the threshold (the shared release stage; on
DuckDB duckdp/noise_stage.py), so seeded runs are reproducible and the noise is the same code as the
Basic mechanisms'.
"""
from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from scipy.special import ndtr

from ...errors import InternalError, InvalidParameter
from ...privacy.budget import Budget, EpsDelta
from ...privacy.calibration import laplace_scale, laplace_threshold, weighted_l1_novelty
from ...stages import Query
from ...stages.base import Engine
from ..base import Mechanism, Param, Params, Round, RoundPlan, approx_budget
from ..basic import gaussian_round, laplace_round
from ..guarantee import RoundGuarantee, basic_bound
from .updates import greedy_fill, l1_descent, l1_descent_l2, l2_descent

BATCH_USERS = 8192   # users per Arrow batch: bounds memory to the histogram plus one batch


def _check_alpha(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0 < float(value) < math.inf):
        raise InvalidParameter(f"alpha must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class PolicyRound:
    """A sequential policy's cutoff Γ = T + α·scale and its α."""

    alpha: float
    cutoff: float


def with_cutoff(plan: RoundPlan, alpha: float) -> RoundPlan:
    """Γ = T + α·scale (journal Alg. 3 and 5: the cutoff sits α noise units above the threshold)."""
    return replace(plan, extra=PolicyRound(alpha, plan.threshold + alpha * plan.scale))


def cutoff_probability(plan: RoundPlan) -> float:
    """P(Γ + noise ≥ T) for the cutoff Γ = T + α·scale (journal Alg. 3/5): Φ(α) or 1 − e^{−α}/2."""
    alpha = plan.extra.alpha
    return float(ndtr(alpha)) if plan.noise == "gaussian" else 1.0 - 0.5 * math.exp(-alpha)


Update = Callable[[np.ndarray, float], np.ndarray]    # one user's update (updates.py)


class _Progress:
    """A one-line users-processed bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.done = total, label, 0

    def advance(self, n: int) -> None:
        self.done += n
        filled = int(30 * self.done / max(self.total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {self.done:,}/{self.total:,} users")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")


def update_loop(batches: Iterable[pa.RecordBatch], n_items: int, update: Update, gamma: float,
                progress: _Progress | None = None) -> np.ndarray:
    """Run `update` for each user's item-id list, in stream order, on one weight array."""
    weights = np.zeros(n_items, dtype=np.float64)
    for batch in batches:
        lists = batch.column(0)
        offsets = lists.offsets.to_numpy()
        ids = lists.values.to_numpy()
        for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
            user_items = ids[start:end]
            weights[user_items] = update(weights[user_items], gamma)
        if progress:
            progress.advance(batch.num_rows)
    if progress:
        progress.close()
    return weights


def sequential_histogram(stages: Engine, update: Update, gamma: float, counted: bool,
                         max_contributions: int) -> tuple[np.ndarray, Query]:
    """The policy histogram as a weight array by item id, and the stored items frame mapping ids to keys."""
    from ...stages.duckdb import DuckDBStages
    from . import duckdb as own  # the only engine these mechanisms run on (`engines`)

    if not isinstance(stages, DuckDBStages):
        raise InternalError(f"invariant failed: the sequential policies run only on DuckDB, not {stages.name}")

    pairs, items, n_items = own.policy_pairs(stages, counted, max_contributions)
    progress = _Progress(own.count_users(stages, pairs), "duckdp") if sys.stderr.isatty() else None
    reader = own.policy_lists(stages, pairs, items, BATCH_USERS)
    try:
        weights = update_loop(reader, n_items, update, gamma, progress)
    finally:
        reader.close()
    return weights, items


class _Sequential(Mechanism):
    update: Update
    engines = ("duckdb",)
    engine_note = ("the sequential policies (policy_*, gw) process users one after another and run only on "
                   "DuckDB; on Spark use weighted_gaussian, dpsips, adaptive_sips, mad or mad2r")
    counted = False          # GW ranks keys by row count and skips deduplication and truncation

    def explain_round(self, index: int, plan: RoundPlan, params: Params) -> RoundGuarantee:
        """The threshold applies to the policy's weights, which depend on the order of users; a key
        whose weight reaches Γ is released with P(Γ + noise ≥ T). The users table assumes an even
        split of each user's budget (a reference, not a bound)."""
        note = (f"T applies to the policy's weights; keys reaching the cutoff Γ = {plan.extra.cutoff:.5g} "
                f"are released with probability {cutoff_probability(plan):.4f}")
        if self.exponent is None:
            return RoundGuarantee("none", "users fill their most frequent keys up to Γ; weights depend on the "
                                  "order of users", notes=[note])
        bound = basic_bound(plan, self.exponent)
        return RoundGuarantee("reference", bound.weighting + " while below Γ (even split)", bound.probability, [note])

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        (round_plan,) = plan
        weights, items = sequential_histogram(stages, self.update, round_plan.extra.cutoff, self.counted,
                                              params.delta0)
        table = stages.output(self.own_stages(stages).policy_release(stages, weights, items, round_plan))
        return table, [Round.from_plan(0, round_plan, stages.num_rows(table))]


class PolicyLaplace(_Sequential):
    """ℓ1 sensitivity 1 (ℓ1-contractive ℓ1-descent, Thm 1.1), novel sensitivity ρ(t) = 1/t, Laplace
    noise λ = 1/ε, threshold ρ_Lap (journal Alg. 3, Thm 4.1)."""

    name = "policy_laplace"
    citation = "Gopi et al., DPSU journal version, Alg. 3 with ℓ1-descent (Alg. 4), Thm 4.1"
    summary = "Users in keyed-random order spread an ℓ1 budget of 1 evenly over their keys below the cutoff Γ."
    params = (Param("alpha", 3.0, "cutoff Γ = threshold + α·λ (journal §6.2.3: 3)", _check_alpha),)
    budgets = (EpsDelta,)
    exponent = 1.0
    update = staticmethod(l1_descent)

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        # λ = 1/ε, ρ_Lap = max_t [1/t + λ log(1/(2(1−(1−δ)^{1/t})))] (journal Alg. 3, Thm 4.1)
        return [with_cutoff(laplace_round(approx_budget(budget), params.delta0), params["alpha"])]


class PolicyGaussian(_Sequential):
    """ℓ2 sensitivity 1 (ℓ2-contractive ℓ2-descent, Lemma 5.2), novel sensitivity ρ(t) = 1/√t,
    analytic Gaussian σ at (ε, δ/2) and threshold at δ/2 (journal Alg. 5, Thm 5.1); zCDP form:
    σ = 1/√(2ρ) and threshold at δ (DP-SIPS Alg. 2, Thm 13, as used for DPSU in its §5.2.2)."""

    name = "policy_gaussian"
    citation = "Gopi et al., DPSU journal version, Alg. 5 with ℓ2-descent (Alg. 7), Thm 5.1; zCDP: DP-SIPS §5.2.2"
    summary = "Users in keyed-random order move their keys towards the cutoff Γ by an ℓ2 distance of 1."
    params = (Param("alpha", 3.0, "cutoff Γ = threshold + α·σ (journal §6.2.3: 3)", _check_alpha),)
    exponent = 0.5
    update = staticmethod(l2_descent)

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        # σ and T of journal Thm 5.1 ((ε, δ)) or DP-SIPS Alg. 2 (zCDP); Γ = T + α·σ (Alg. 5)
        return [with_cutoff(gaussian_round(budget, params.delta0), params["alpha"])]


class PolicyGaussianL1(PolicyGaussian):
    """As policy_gaussian with ℓ1-descent under an ℓ2 budget (journal Alg. 8).

    Caution: the calibration assumes ℓ2 sensitivity 1 from the journal's Prop. 5.1, whose proof
    sets to 0 a Jacobian block of spectral norm ‖G_f‖/(√(d−t)·λ). Families of users whose t keys
    sit just under Γ amplify a neighbour's change: tests/test_policy.py pins neighbour pairs with
    ℓ2 sensitivity 1.19 (1.48 with trimmed gaps) at the journal's own setting (ε = 3, δ = e⁻¹⁰,
    Δ0 = 100, α = 5) and 1.70 at Δ0 = 300, so this mechanism's (ε, δ) guarantee does not hold as
    calibrated.
    """

    name = "policy_gaussian_l1"
    citation = "Gopi et al., DPSU journal version, Alg. 5 with ℓ1-descent (Alg. 8), Thm 5.1; zCDP: DP-SIPS §5.2.2"
    summary = "Users in keyed-random order raise their keys below Γ evenly, by an ℓ2 budget of 1."
    unproven = ("its ℓ2-sensitivity-1 claim (journal Prop. 5.1) is false: at the journal's own setting "
                "(ε = 3, δ = e^-10, Δ0 = 100, α = 5) neighbouring histograms are 1.48 apart in ℓ2 "
                "(1.70 at Δ0 = 300), and the gap grows with Δ0, so σ calibrated for sensitivity 1 "
                "does not make it (ε, δ)-DP.")
    params = (Param("alpha", 5.0, "cutoff Γ = threshold + α·σ (journal §6.2.3: 5)", _check_alpha),)
    update = staticmethod(l1_descent_l2)


class GW(_Sequential):
    """Greedy updates Without sampling (Carvalho et al. AAAI 2022; DP-SIPS §3.2.2).

    No deduplication and no truncation (Δ0 is not used): each user ranks their keys by how many
    input rows hold them, ties by a keyed hash of the key (one secret order shared by all users,
    as the input order is in Carvalho et al.'s code), and fills them in that order up to the cutoff Γ
    with an ℓ1 budget of 1, so the histogram has ℓ1 sensitivity 1; Laplace noise λ = 1/ε.
    Threshold T = 1 + λ log(1/(2δ)): the Laplace threshold of journal Thm 4.1 with ρ(1) = 1 and
    t = 1, as in Carvalho et al. (and their code): since Γ > T > 1, a key at weight 0 takes all of
    the user's remaining budget, so the added user creates at most one novel key, with weight ≤ 1.
    Caution: later users' spill-over can also reach keys that no user filled without the added
    user, arbitrarily many: m later users can each spill 1/m onto a key of their own
    (tests/test_policy.py pins m = 64). Their weights sum to ≤ 1 by ℓ1 sensitivity, but the t = 1
    threshold does not cover several keys: at ε = 1, δ = 1e-5 the 64 keys are released with
    probability 23.9·δ (≈ m·e^{−(1−1/m)}·δ, unbounded in m).
    """

    name = "gw"
    citation = "Carvalho, Wang, Gondara, AAAI 2022 (GW), as in DP-SIPS §3.2.2; threshold per journal Thm 4.1 at t = 1"
    summary = "Users in keyed-random order fill their most frequent keys up to Γ with an ℓ1 budget of 1."
    unproven = ("its published threshold covers one novel key, but later users' spill-over can give "
                "weight to arbitrarily many keys nobody reached without the added user: 64 keys of "
                "weight 1/64 are released with probability 23.9·δ at ε = 1, δ = 1e-5.")
    params = (Param("alpha", 3.0, "cutoff Γ = threshold + α·λ", _check_alpha),)
    budgets = (EpsDelta,)
    counted = True
    truncates = False
    update = staticmethod(greedy_fill)

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        scale = laplace_scale(approx_budget(budget).epsilon)
        # T = max_{t ≤ 1} [1/t + λ log(1/(2(1−(1−δ)^{1/t})))] = 1 + λ log(1/(2δ)) (Thm 4.1 form, one novel key)
        threshold = laplace_threshold(scale, budget.delta, 1, weighted_l1_novelty)
        return [with_cutoff(RoundPlan(budget, "laplace", scale, threshold), params["alpha"])]
