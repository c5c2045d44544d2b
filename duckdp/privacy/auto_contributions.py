"""`max_contributions="auto"`: a small share of the budget buys a DP choice of Δ0.

Design. Every user u falls in exactly one bucket of its distinct-key count |W_u|: geometric buckets
[1, 4), [4, 16), …, [1024, 4096), [4096, ∞) (`EDGES`). The engine counts users per bucket (stage
`contribution_histogram`, sql/stage_contribution_histogram.sql). Each bucket count gets independent
continuous Gaussian noise N(0, σ_a²) from the release's PRF under its own purpose label (sub-key
K[b"auto", 0, 0], inputs 0..B−1; duckdp/prf.py). Each noisy count is soft-thresholded at `SHRINK`·σ_a
(`denoise`: max(noisy − σ_a, 0), Donoho & Johnstone 1994), which removes most of the mass that noise puts
in empty buckets while moving Δ0 continuously with the counts; Δ0 is the `QUANTILE` (p90) of the
denoised histogram, interpolated geometrically inside its bucket, rounded up to an integer and clamped
to [1, `CAP`]. If every denoised count is 0, Δ0 = `FALLBACK` (a data-independent constant). Only Δ0
— an integer post-processing of the noisy histogram — is released; the noisy counts never leave this
module (float noise is fine for a released decision, DESIGN.md §6: only released *numbers* need a
discrete grid).

Privacy. Adding or removing one user (with all rows) changes exactly one bucket count by 1, so the
histogram has ℓ2 sensitivity 1 and the Gaussian step is (1/σ_a)-GDP (Dong, Roth & Su 2022, Thm 2.7)
and ½σ_a⁻²-zCDP (Bun & Steinke 2016, Prop. 1.6). The mechanism then runs with the chosen Δ0 — a
function of the private estimate only — and the remaining budget, so the whole release is an
adaptive composition of two steps:

- ρ-zCDP: ρ_a + ρ_m = ρ and δ_a + δ_m = δ (split by `split_exact`, exact sums). The estimate is
  ρ_a-zCDP (σ_a = 1/√(2ρ_a)), a fortiori δ_a-approximate; zCDP composes additively (Bun & Steinke
  2016 Lemma 2.3; approximate zCDP: DP-SIPS Lemma 6).
- (ε, δ) with a mechanism whose rounds are all Gaussian: the release is Gaussian DP as a whole. μ is
  the GDP of (ε, δ − δ_m/2) (analytic Gaussian, Balle & Wang 2018 Thm 8 = Dong et al. Cor. 2.13);
  the mechanism gets (ε_m, δ_m) with ε_m the ε at which √(1−s)·μ-GDP spends δ_m/2 (its own curve
  share; its novel keys spend the other δ_m/2), and the estimate μ_a = √(μ² − μ_m²) with μ_m the
  mechanism's planned √Σ(Δ_j/σ_j)². GDP composes exactly (Dong et al. Cor. 3.3), so the curve at ε
  is ≤ δ − δ_m/2 and with the novel-key δ_m/2 the total is ≤ δ. The plan is admitted only if the
  repo's accountant (privacy/accounting.admits) confirms the composed events are (ε, δ)-DP. The
  nominal charges (ε_a, δ_a) = (ε − ε_m, δ − δ_m) sum exactly to the request (convention of
  jointly calibrated rounds: shares of the request, not standalone guarantees).
- (ε, δ) with a non-Gaussian mechanism (Laplace, truncated geometric), or where the split above
  does not apply (tiny ε with a large δ, ε_m < ε/2) or is not admitted: basic composition (Dwork &
  Roth 2014, Thm 3.16): the estimate gets (sε, sδ) with σ_a the analytic Gaussian σ (Balle & Wang
  2018 Thm 8), the mechanism the rest; also confirmed by the accountant.

Δ0 enters the mechanism's plan only through thresholds: its privacy events (σ, sensitivities,
novel-key δ) must not depend on Δ0, so the Session can charge the whole release before any data is
read. `plan` refuses mechanisms whose noise scales, sensitivities or δ's differ between Δ0 = 1 and
Δ0 = CAP (count_gaussian, count_laplace: sensitivity √Δ0, Δ0), and `finish` re-checks the privacy
events at the chosen Δ0 against the charged ones.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InternalError, InvalidParameter
from ..prf import PRFKey, standard, uniform_from_words
from . import accounting
from .accountant import curves
from .budget import ZCDP, Budget, EpsDelta, _exact_parts, split_exact
from .calibration import _up, analytic_gaussian_sigma, zcdp_sigma

if TYPE_CHECKING:
    from ..mechanisms.base import RoundPlan

    Planner = Callable[[Budget, int], list[RoundPlan]]   # a mechanism's plan(budget, Δ0)
from .events import ComposedEvent, CurveEvent, GaussianEvent, ZcdpEvent

AUTO = "auto"
DEFAULT_SHARE = 0.005               # share of ρ (zCDP), of μ² (Gaussian (ε, δ)) or of ε (basic composition)
MAX_SHARE = 0.25
EDGES = (1, 4, 16, 64, 256, 1024, 4096)   # bucket b = [EDGES[b], EDGES[b+1]); the last is [4096, ∞)
CAP = EDGES[-1]
QUANTILE = 0.9
SHRINK = 1.0                        # soft threshold of every noisy count, in units of σ_a (`denoise`)
FALLBACK = 100                      # Δ0 when every noisy count is ≤ 0 (data-independent)
PURPOSE = b"auto"                   # PRF sub-key label of the estimate's noise (duckdp/prf.py)


@dataclass(frozen=True)
class AutoPlan:
    """The data-free plan of the Δ0 estimate: its nominal charge, σ_a and the mechanism's budget."""

    share: float
    budget: Budget | ZcdpEvent            # the estimate's charge (a share of the request; module docstring)
    sigma: float                          # σ_a of the Gaussian noise on each bucket count (ℓ2 sensitivity 1)
    mechanism_budget: Budget | None       # what the mechanism runs with (None: `aggregate` plans its parts)
    composition: str                      # "zcdp", "gdp" or "basic"

    def mechanism(self) -> Budget:
        """The mechanism's budget (select()'s estimate only)."""
        if self.mechanism_budget is None:
            raise InternalError("invariant failed: this estimate's caller plans the rest of its budget")
        return self.mechanism_budget

    def round_plan(self) -> RoundPlan:
        """The estimate as a Gaussian round for the accountant and the Session: μ = 1/σ_a, no novel-key δ."""
        from ..mechanisms.base import RoundPlan
        if not isinstance(self.budget, (EpsDelta, ZCDP)):
            raise InternalError("invariant failed: only select()'s estimate is a round of its own")
        return RoundPlan(self.budget, "gaussian", self.sigma, SHRINK * self.sigma, sensitivity=1.0,
                         novel_delta=0.0)


@dataclass(frozen=True)
class AutoChoice:
    """What the estimate released (Δ0) and what it cost, for Release.report()/params/spent."""

    max_contributions: int
    plan: AutoPlan

    def as_dict(self) -> dict:
        return {"max_contributions": self.max_contributions, "share": self.plan.share, "sigma": self.plan.sigma,
                "cost": _cost(self.plan.budget), "composition": self.plan.composition}

    def describe(self) -> str:
        b = self.plan.budget
        cost = (f"ρ={b.rho:.4g}, δ={b.delta:.3g}" if isinstance(b, (ZCDP, ZcdpEvent))
                else f"ε={b.epsilon:.4g}, δ={b.delta:.3g}")
        how = {"zcdp": "zCDP, additive", "gdp": "Gaussian DP, composed exactly",
               "basic": "basic composition"}[self.plan.composition]
        return (f"Δ0 = {self.max_contributions} chosen privately (p{QUANTILE * 100:g} of users' distinct-key "
                f"counts, σ={self.plan.sigma:.4g}); cost {cost} ({self.plan.share:g} share, {how})")


def _cost(budget: Budget | ZcdpEvent) -> dict:
    return {"rho": budget.rho, "delta": budget.delta} if isinstance(budget, ZcdpEvent) else budget.as_dict()


def zcdp_part(rho: float, share: float) -> AutoPlan:
    """The estimate on ρ_a = `rho`, a part the caller split off its own zCDP budget (`aggregate`: the
    estimate's ρ_a and the other parts sum to the call's ρ; zCDP adds, Bun & Steinke 2016 Lemma 2.3).
    Pure ρ_a-zCDP: σ_a = 1/√(2ρ_a) at ℓ2 sensitivity 1 (Prop. 1.6), no δ."""
    return AutoPlan(check_share(share), ZcdpEvent(rho, 0.0), zcdp_sigma(rho), None, "zcdp")


def check_share(share: Any) -> float:
    """The estimate's budget share: a number in (0, MAX_SHARE]."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not (0 < float(share) <= MAX_SHARE):
        raise InvalidParameter(f"auto_share must be a number in (0, {MAX_SHARE}], got {share!r}")
    return float(share)


def is_auto(max_contributions: object) -> bool:
    return isinstance(max_contributions, str) and max_contributions == AUTO


def _events(plans: list[RoundPlan]) -> list[CurveEvent]:
    """The curve events of RoundPlans (privacy/events.py), as an (ε, δ) accountant composes them."""
    return curves(ComposedEvent(tuple(p.event for p in plans)))


def _gaussian_mu(events: list[CurveEvent]) -> float | None:
    """√Σ μ_j² of all-Gaussian events, or None if any event is not Gaussian."""
    mus = [e.mu for e in events if isinstance(e, GaussianEvent)]
    if len(mus) != len(events):
        return None
    return math.sqrt(math.fsum(m ** 2 for m in mus))


def _noise_fields(rounds: list[RoundPlan]) -> list[tuple]:
    """What a plan's privacy rests on besides thresholds: budget, noise, scale, sensitivity, δ_j, μ_j."""
    return [(r.budget, r.noise, r.scale, r.sensitivity, r.novel_delta, r.mu) for r in rounds]


def plan(budget: Budget, share: float, mechanism_plan: Planner) -> tuple[AutoPlan, list[RoundPlan]]:
    """The estimate's plan and the mechanism's plan (at Δ0 = CAP, for charging) for a request `budget`.

    `mechanism_plan(budget, max_contributions)` is the mechanism's data-free planner. Raises
    InvalidParameter if the mechanism's noise depends on Δ0 or no split fits the request.
    """
    share = check_share(share)
    if isinstance(budget, ZCDP):
        auto_budget, mech_budget = split_exact(budget, [share, 1 - share])
        auto = AutoPlan(share, auto_budget, zcdp_sigma(auto_budget.rho), mech_budget, "zcdp")  # B&S Prop. 1.6, Δ2 = 1
    else:
        splits = (_split_gdp(budget, share, mechanism_plan), _split_basic(budget, share))
        admitted = [a for a in splits if a is not None and _admitted(budget, a, mechanism_plan)]
        if not admitted:
            raise InvalidParameter(f"the auto-Δ0 split does not fit {budget}; use a fixed max_contributions")
        auto = admitted[0]
    mech = mechanism_plan(auto.mechanism(), CAP)
    if _noise_fields(mechanism_plan(auto.mechanism(), 1)) != _noise_fields(mech):
        raise InvalidParameter("max_contributions='auto' needs a mechanism whose noise does not depend on Δ0 "
                               "(only its thresholds); give this mechanism a fixed max_contributions")
    return auto, mech


def _admitted(budget: EpsDelta, auto: AutoPlan, mechanism_plan: Planner) -> bool:
    """Whether the repo's accountant (privacy/accounting.py) finds estimate + mechanism (ε, δ)-DP, and its
    ε at δ (root-found, rounded up: what a Session reports as spent) is within the request too."""
    events = _events([auto.round_plan(), *mechanism_plan(auto.mechanism(), CAP)])
    return (accounting.admits(events, budget.epsilon, budget.delta)
            and accounting.composed_epsilon(events, budget.delta) <= budget.epsilon)


# Relative margin on σ_a (a larger σ is always still private): the accountant rounds its sums and
# root-finding up, so σ_a calibrated to the last ulp would be refused by a hair.
_MARGIN = 1e-9


def _split_gdp(budget: EpsDelta, share: float, mechanism_plan: Planner) -> AutoPlan | None:
    """The exact Gaussian-DP split of the module docstring, or None where it does not apply (a
    non-Gaussian mechanism, or ε_m < ε/2 where ε − ε_m would not be exact)."""
    if _gaussian_mu(_events(mechanism_plan(budget, CAP))) is None:
        return None
    delta_a, delta_m = _exact_parts(budget.delta, [share, 1 - share])
    curve = budget.delta - delta_m / 2                          # room for the joint Gaussian curve at ε
    mu = 1.0 / analytic_gaussian_sigma(budget.epsilon, curve)   # Balle & Wang Thm 8 ⇔ Dong et al. Cor. 2.13
    # ε_m: where √(1−s)·μ-GDP spends δ_m/2 (rounded up, so the mechanism's μ_m ≤ √(1−s)·μ up to rounding)
    eps_m = accounting.composed_epsilon([GaussianEvent(mu * math.sqrt(1 - share), 0.0)], delta_m / 2)
    if not (budget.epsilon / 2 <= eps_m < budget.epsilon):
        return None
    eps_a = budget.epsilon - eps_m                              # exact (Sterbenz: ε/2 ≤ ε_m ≤ ε), so ε_a + ε_m = ε
    mech_budget = EpsDelta(eps_m, delta_m)
    mu_m = _gaussian_mu(_events(mechanism_plan(mech_budget, CAP)))
    if mu_m is None or mu_m >= mu:
        return None
    # μ_a² + μ_m² ≤ μ² (Dong et al. Cor. 3.3); σ_a a relative _MARGIN above, so the accountant's
    # root-found ε at δ (rounded up, ~1e-14 slack) stays within the request too
    sigma = _up(1.0 / math.sqrt(mu * mu - mu_m * mu_m)) * (1 + _MARGIN)
    return AutoPlan(share, EpsDelta(eps_a, delta_a), sigma, mech_budget, "gdp")




def _split_basic(budget: EpsDelta, share: float) -> AutoPlan:
    """Basic composition (Dwork & Roth 2014 Thm 3.16): (sε, sδ) for the estimate, analytic Gaussian σ_a
    (Balle & Wang 2018 Thm 8), the rest for the mechanism."""
    auto_budget, mech_budget = split_exact(budget, [share, 1 - share])
    sigma = analytic_gaussian_sigma(auto_budget.epsilon * (1 - _MARGIN), auto_budget.delta)
    return AutoPlan(share, auto_budget, sigma, mech_budget, "basic")


def noise(key: PRFKey, n: int) -> np.ndarray:
    """n standard normal draws under the estimate's own sub-key K[b"auto", 0, 0] at inputs 0..n−1."""
    sub = key.derive(PURPOSE, 0)
    return standard("gaussian", uniform_from_words(sub.words(np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64))))


def denoise(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """Soft thresholding at SHRINK·σ_a, max(noisy − σ_a, 0) per bucket (Donoho & Johnstone 1994).

    An empty bucket keeps E[(Z − 1)⁺]·σ_a ≈ 0.08σ_a of its noise, so noise in empty high buckets hardly
    drags the quantile up; a real bucket of c users keeps about c − σ_a, shrinking continuously rather
    than vanishing below a cut. The hard cut it replaces (the run of buckets around the noisy mode that
    reach σ_a) dropped a real tail bucket whole with probability Φ(1 − c/σ_a) and moved Δ0 a bucket
    (×4) down; soft thresholding was chosen over it, and the share of 0.5 % over 1 %, on held-out seeds
    101–130 (benchmarks/RESULTS.md, "Automatic Δ0"). Post-processing of the noisy counts: privacy is
    untouched."""
    return np.maximum(np.asarray(noisy, dtype=np.float64) - SHRINK * sigma, 0.0)


def choose(counts: np.ndarray, sigma: float, z: np.ndarray) -> int:
    """Δ0 from exact bucket counts, σ_a and standard normal draws z (one per bucket): the p90 of the
    `denoise`d noisy histogram, interpolated geometrically in its bucket, in [1, CAP]."""
    kept = denoise(np.asarray(counts, dtype=np.float64) + sigma * np.asarray(z, dtype=np.float64), sigma)
    total = float(kept.sum())
    if not total > 0:
        return FALLBACK
    target = QUANTILE * total
    cum = np.cumsum(kept)
    b = int(np.searchsorted(cum, target, side="left"))
    b = min(b, len(kept) - 1)
    if b >= len(EDGES) - 1:                                     # the open bucket [CAP, ∞)
        return CAP
    frac = (target - (cum[b] - kept[b])) / kept[b]
    ratio = EDGES[b + 1] / EDGES[b]
    return int(min(max(math.ceil(EDGES[b] * ratio ** min(max(frac, 0.0), 1.0)), 1), CAP))


def estimate(stages: Any, auto: AutoPlan, key: PRFKey) -> AutoChoice:
    """Run the engine's histogram stage and choose Δ0 (the only value released)."""
    counts = np.zeros(len(EDGES), dtype=np.int64)
    for bucket, users in stages.contribution_histogram(stages.pairs(), list(EDGES)):
        counts[int(bucket)] = int(users)
    return AutoChoice(choose(counts, auto.sigma, noise(key, len(EDGES))), auto)


def finish(choice: AutoChoice, charged: list[RoundPlan], mechanism_plan: Planner) -> list[RoundPlan]:
    """The mechanism's plan at the chosen Δ0, after checking its privacy events equal the charged ones."""
    mech = mechanism_plan(choice.plan.mechanism(), choice.max_contributions)
    if _events(mech) != _events(charged):
        raise InternalError("the mechanism's privacy events changed with Δ0 after the charge")
    return mech


__all__ = ["AUTO", "AutoChoice", "AutoPlan", "check_share", "choose", "denoise", "estimate", "finish", "is_auto",
           "plan", "zcdp_part"]
