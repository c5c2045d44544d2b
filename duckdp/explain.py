"""What a key needs to be released, from the plan alone (no data): thresholds in weight units and in users.

Under the Basic weighting a user who holds k ≤ Δ0 keys keeps all of them and adds k^(−e) to each
(e = ½ weighted ℓ2, 1 weighted ℓ1, 0 counts; Gopi et al. ICML 2020 §1.1), so a key held by N
such users has weight ≥ N·k^(−e) and, since P(w + noise ≥ T) grows with w, is released with
probability ≥ P(N·k^(−e) + noise ≥ T). `explain` reports, per round and for each k, the smallest
N with that probability ≥ 50 % and ≥ 95 %.

How each mechanism relates to that bound:
- Basic mechanisms: the bound itself (equality when every holder has exactly k keys).
- DP-SIPS: later rounds see subsets of the users' sets, so each round's weight is still ≥ N/√k
  and its noise is fresh: P(released in some round) ≥ 1 − Π_i (1 − p_i) (Swanberg et al. Alg. 3).
- MAD: stochastic dominance over Basic with the same σ, T (Chen et al. ICML 2025 Thm 6.1; spec
  docs/specs/mad-mad2r.md §7): P ≥ min(P_Basic, Φ(b)). MAD2R: the same for its first round (round 0);
  round 1 removes and down-weights keys from round-0 estimates, so its numbers are a reference.
- Adaptive SIPS (docs/specs/adaptive-sips.md): round 0 is Weighted Gaussian (a bound); later rounds drop
  keys and lower levels from earlier noisy weights, so their numbers (a key at level 1 gets ≥ 1/√k
  from each holder) are a reference, and the guarantee is round 0's.
- Sequential policies: the threshold applies to the policy's weights, which depend on the order of
  users; a key whose weight reaches the cutoff Γ = T + α·scale is released with P(Γ + noise ≥ T).
  The users table assumes an even split of each user's budget (a reference, not a bound).
- Truncated geometric: a key held by N users is kept with exactly π(N) (Desfontaines et al. 2022 Thm 1).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa
from scipy.special import ndtr

from . import mechanisms
from .errors import InvalidParameter
from .privacy.budget import Budget, make_budget
from .privacy.calibration import (_check_max_contributions, gaussian_release_probability,
                                  laplace_release_probability)
from .privacy.composition import composition_lines
from .validation import integer

TARGETS = (0.5, 0.95)
_MAX_USERS = 10**15      # beyond this a key is treated as never reaching the target

# Per mechanism: weighting exponent e (None: no per-user translation) and how the numbers relate.
_BASIC = {"weighted_gaussian": 0.5, "count_gaussian": 0.0, "weighted_laplace": 1.0, "count_laplace": 0.0,
          "dpsips": 0.5, "truncated_geometric": 0.0}
_REFERENCE = {"policy_gaussian": 0.5, "policy_gaussian_l1": 0.5, "policy_laplace": 1.0, "gw": None}
_ADAPTIVE = {"mad": 0.5, "mad2r": 0.5}
_STEERED = {"adaptive_sips": 0.5}


def _exponent(mech) -> float | None:
    """The weighting exponent e used in the users table; unknown mechanisms may declare `exponent`."""
    for table in (_BASIC, _REFERENCE, _ADAPTIVE, _STEERED):
        if mech.name in table:
            return table[mech.name]
    return getattr(mech, "exponent", None)


@dataclass(frozen=True)
class UsersNeeded:
    """For holders of ≤ `keys_per_user` keys: each adds `weight_per_user`; `users_50`/`users_95` are the
    smallest numbers of such holders giving release probability ≥ 50 % / 95 % (None: never)."""

    keys_per_user: int
    weight_per_user: float
    users_50: int | None
    users_95: int | None


@dataclass
class RoundExplanation:
    """One round's plan (noise, scale σ or λ, threshold T in weight units) and its users table.

    `kind` is "bound" (a guarantee), "reference" (the Basic weighting for orientation only) or
    "none" (no per-user translation).
    """

    index: int
    budget: Budget
    noise: str
    scale: float
    threshold: float
    kind: str
    weighting: str
    users: list[UsersNeeded] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    probability: Callable[[np.ndarray, int], np.ndarray] | None = field(default=None, repr=False)


@dataclass
class Explanation:
    """`duckdp.explain`'s answer: per-round thresholds and users needed; `overall` is the whole release's
    users table where a bound exists (the round's own table for one-round mechanisms)."""

    algo: str
    citation: str
    budget: Budget
    max_contributions: int
    params: dict
    rounds: list[RoundExplanation]
    overall: list[UsersNeeded] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _overall_probability: Callable | None = field(default=None, repr=False)
    composition: list[str] = field(default_factory=list)    # how Gaussian rounds compose (μ, σ_j, conversion)

    def release_probability(self, n_users, keys_per_user: int, round: int | None = None) -> np.ndarray:
        """P(release) (a lower bound where the round's kind is "bound") for a key held by `n_users`
        users with ≤ `keys_per_user` keys each; `round=None` is the whole release where defined."""
        fn = self._overall_probability if round is None else self.rounds[round].probability
        if fn is None:
            raise ValueError(f"{self.algo}: no release probability in users for "
                             f"{'the whole release' if round is None else f'round {round}'}")
        return fn(np.asarray(n_users, dtype=np.float64), keys_per_user)

    def to_arrow(self) -> pa.Table:
        """One row per (round, keys per user); round −1 holds the combined rounds."""
        rows = [(r.index, r.kind, u) for r in self.rounds for u in r.users]
        if len(self.rounds) > 1:
            rows += [(-1, "bound", u) for u in self.overall]
        return pa.table({
            "round": pa.array([r[0] for r in rows], pa.int64()),
            "kind": pa.array([r[1] for r in rows], pa.string()),
            "keys_per_user": pa.array([r[2].keys_per_user for r in rows], pa.int64()),
            "weight_per_user": pa.array([r[2].weight_per_user for r in rows], pa.float64()),
            "users_50": pa.array([r[2].users_50 for r in rows], pa.int64()),
            "users_95": pa.array([r[2].users_95 for r in rows], pa.int64()),
        })

    def lines(self) -> list[str]:
        """The readable section shared by `str()` and `Release.report()`."""
        out = ["  what a key needs to be released (data-free):"]
        for r in self.rounds:
            if r.noise in ("gaussian", "laplace"):
                unit = "σ" if r.noise == "gaussian" else "λ"
                out.append(f"  round {r.index}: {r.noise} noise {unit} = {r.scale:.5g}, "
                           f"threshold T = {r.threshold:.6g} (weight units)")
            else:
                out.append(f"  round {r.index}: {r.noise} noise (scale {r.scale:.5g}), threshold {r.threshold:.6g}")
            out.append(f"    weighting: {r.weighting}")
            out += [f"    {n}" for n in r.notes]
            if r.users:
                label = "at least" if r.kind == "bound" else "reference, not a bound:"
                out += _table(r.users, label)
        if self.overall and len(self.rounds) > 1:
            out.append(f"  all {len(self.rounds)} rounds together (a key is released if any round releases it):")
            out += _table(self.overall, "at least")
        if self.overall and self.overall[-1].users_50 is not None:
            u = self.overall[-1]
            tail = f" (≥ 95 % with ≥ {u.users_95:,} users)" if u.users_95 is not None else ""
            out.append(f"  → a key held by ≥ {u.users_50:,} users who each hold ≤ {u.keys_per_user} keys is "
                       f"released with probability ≥ 50 %{tail}.")
        out += [f"  note: {n}" for n in self.notes]
        return out

    def __str__(self) -> str:
        head = [f"duckdp explain — {self.algo}: {self.budget}, Δ0 = {self.max_contributions}",
                f"  mechanism : {self.citation}"]
        head += [f"  {'accounting' if i == 0 else '':<10}: {line}" for i, line in enumerate(self.composition)]
        return "\n".join(head + self.lines())


def _table(rows: list[UsersNeeded], label: str) -> list[str]:
    fmt = lambda n: f"{n:,}" if n is not None else "never"   # noqa: E731
    out = [f"    {'keys/user k':>11} {'weight/user':>12} {'users for ≥50 %':>16} {'users for ≥95 %':>16}"
           f"   ({label})"]
    out += [f"    {u.keys_per_user:>11,} {u.weight_per_user:>12.4g} {fmt(u.users_50):>16} {fmt(u.users_95):>16}"
            for u in rows]
    return out


def smallest_users(probability: Callable[[np.ndarray], np.ndarray], target: float) -> int | None:
    """Smallest integer N ≥ 1 with probability(N) ≥ target, for a probability nondecreasing in N."""
    hi = 1
    while probability(np.array([hi], dtype=np.float64))[0] < target:
        if hi > _MAX_USERS:
            return None
        hi *= 2
    lo = hi // 2          # probability(lo) < target, or lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probability(np.array([mid], dtype=np.float64))[0] >= target:
            hi = mid
        else:
            lo = mid
    return hi


def default_holdings(max_contributions: int) -> list[int]:
    """k = 1, 2, 5, 10, 20, 50, … up to Δ0, and Δ0 itself."""
    ks = [m * 10**p for p in range(19) for m in (1, 2, 5) if m * 10**p < max_contributions]
    return ks + [max_contributions]


def _users(probability, holdings: list[int], exponent: float) -> list[UsersNeeded]:
    rows = []
    for k in holdings:
        targets = [smallest_users(lambda n, k=k: probability(n, k), t) for t in TARGETS]
        rows.append(UsersNeeded(k, float(k) ** -exponent, *targets))
    return rows


def _noise_probability(noise: str, scale: float, threshold: float, exponent: float):
    """P(N·k^(−e) + noise ≥ T) as a function of (N, k), or None for noise without a closed form here."""
    release = {"gaussian": gaussian_release_probability, "laplace": laplace_release_probability}.get(noise)
    if release is None:
        return None
    return lambda n, k: release(n * float(k) ** -exponent, scale, threshold)


def _keep_probability(plan) -> Callable:
    """π(N) of the truncated geometric mechanism with the plan's per-key (ε, δ) (Desfontaines et al. Thm 1)."""
    from .mechanisms.truncated_geometric import keep_probabilities
    probs = np.concatenate([[0.0], keep_probabilities(plan.extra["per_key_epsilon"], plan.extra["per_key_delta"])])
    return lambda n, k: np.where(n < len(probs), probs[np.minimum(n, len(probs) - 1).astype(np.int64)], 1.0)


def _cutoff_probability(plan) -> float:
    """P(Γ + noise ≥ T) for the policy cutoff Γ = T + α·scale (journal Alg. 3/5): Φ(α) or 1 − e^{−α}/2."""
    alpha = plan.extra["alpha"]
    return float(ndtr(alpha)) if plan.noise == "gaussian" else 1.0 - 0.5 * float(np.exp(-alpha))


def _weighting_text(exponent: float) -> str:
    return {0.5: "each user adds 1/√k to each of their k kept keys",
            1.0: "each user adds 1/k to each of their k kept keys",
            0.0: "each user adds 1 to each kept key (counts)"}.get(exponent, f"each user adds k^(−{exponent:g})")


def _explain_plan(mech, budget: Budget, max_contributions: int, params: dict, holdings: list[int]) -> Explanation:
    plans = mech.plan(budget, max_contributions, params)
    name = mech.name
    rounds, overall, overall_fn, notes = [], [], None, []
    exponent = _exponent(mech)
    for i, plan in enumerate(plans):
        r = RoundExplanation(i, plan.budget, plan.noise, plan.scale, plan.threshold, "none", "not translated to users")
        if name == "truncated_geometric":
            r.kind, r.weighting = "bound", "a key held by N users is kept with probability π(N)"
            r.probability = _keep_probability(plan)
            r.notes.append(f"per-key budget ε = {plan.extra['per_key_epsilon']:.4g}, "
                           f"δ = {plan.extra['per_key_delta']:.3g}; keys with ≥ {int(plan.threshold):,} users "
                           "are always kept")
        elif name in _ADAPTIVE:
            cap = float(ndtr(params["adaptive_excess"]))
            basic = _noise_probability(plan.noise, plan.scale, plan.threshold, exponent)
            r.weighting = (_weighting_text(exponent) + " (Basic); MAD reroutes excess weight and truncates at "
                           f"τ = {plan.extra['tau']:.5g}")
            if name == "mad" or i == 0:
                r.kind = "bound"
                r.probability = lambda n, k, basic=basic, cap=cap: np.minimum(basic(n, k), cap)
                r.notes.append(f"MAD dominates Basic (Thm 6.1, spec §7): P ≥ min(P_Basic, Φ(b) = {cap:.4f})")
            else:
                r.kind, r.probability = "reference", basic
                r.notes.append("this round drops keys released in round 0 or with a round-0 upper bound below T "
                               "and down-weights keys with a high lower bound "
                               f"(β ≥ {plan.extra['beta_min']:g}): no bound")
        elif name in _STEERED:
            r.weighting = _weighting_text(exponent) + (" (all keys at level 1)" if i == 0 else " for a key at level 1")
            r.probability = _noise_probability(plan.noise, plan.scale, plan.threshold, exponent)
            r.kind = "bound" if i == 0 else "reference"
            if i:
                r.notes.append(f"keys whose earlier noisy weight fell below a_drop·σ are dropped and keys below "
                               f"a_full·σ get level β_min = {params['beta_min']:g}: no bound; T uses the cap "
                               f"c = {plan.extra['cap']:g} (novel sensitivity c/√k)")
            if "joint_mu" in plan.extra and i == len(plans) - 1:
                notes.append(f"rounds composed exactly as μ-GDP, μ = {plan.extra['joint_mu']:.5g} (Dong, Roth & Su "
                             "2022 Cor. 3.3); each round's novel keys get its δ_j")
        elif name in _REFERENCE:
            r.notes.append("T applies to the policy's weights; keys reaching the cutoff "
                           f"Γ = {plan.extra['cutoff']:.5g} are released with probability "
                           f"{_cutoff_probability(plan):.4f}")
            if exponent is None:
                r.weighting = "users fill their most frequent keys up to Γ; weights depend on the order of users"
            else:
                r.kind, r.weighting = "reference", _weighting_text(exponent) + " while below Γ (even split)"
                r.probability = _noise_probability(plan.noise, plan.scale, plan.threshold, exponent)
        elif exponent is not None:
            r.kind, r.weighting = "bound", _weighting_text(exponent)
            r.probability = _noise_probability(plan.noise, plan.scale, plan.threshold, exponent)
            if name == "dpsips" and i:
                r.notes.append("keys released in earlier rounds are removed, so holders' sets only shrink")
        if r.probability is not None:
            r.users = _users(r.probability, holdings, exponent or 0.0)
        rounds.append(r)
    if name == "dpsips":
        fns = [r.probability for r in rounds]
        overall_fn = lambda n, k: 1.0 - np.prod([1.0 - f(n, k) for f in fns], axis=0)   # noqa: E731
        overall = _users(overall_fn, holdings, exponent)
    elif rounds[0].kind == "bound" and (len(rounds) == 1 or name in ("mad2r", "adaptive_sips")):
        overall_fn, overall = rounds[0].probability, rounds[0].users
        if len(rounds) > 1:
            later = "round 1 usually releases" if len(rounds) == 2 else "later rounds usually release"
            notes.append(f"guarantee from round 0 alone (the whole release is at least as likely); {later} "
                         "most keys, near the reference numbers")
    if name != "gw":
        notes.append(f"users with k > Δ0 = {max_contributions} keys keep a uniform random Δ0 of them, so each "
                     "holds a given key with probability Δ0/k")
    if getattr(mech, "unproven", None):
        notes.append("caution: " + mech.unproven)
    composition = (composition_lines(budget, [p.scale for p in plans], [p.extra["mu"] for p in plans])
                   if all("mu" in p.extra for p in plans) else [])
    return Explanation(name, mech.citation, budget, max_contributions, dict(params), rounds, overall, notes, overall_fn,
                       composition)


def _check_holdings(keys_per_user, max_contributions: int) -> list[int]:
    """k values must be integers in [1, Δ0]: above Δ0 truncation makes a key's presence random."""
    values = [] if isinstance(keys_per_user, (str, bytes)) or not isinstance(keys_per_user, Iterable) \
        else list(keys_per_user)
    if not values:
        raise InvalidParameter(f"keys_per_user must be a non-empty list of integers in [1, max_contributions="
                               f"{max_contributions}], got {keys_per_user!r}")
    return sorted({integer("keys_per_user entries", k, 1, max_contributions) for k in values})


def explain(algo: str, *, epsilon: float | None = None, rho: float | None = None, delta: float | None = None,
            max_contributions: int = 100, keys_per_user: list[int] | None = None, **algo_params) -> Explanation:
    """Explain, without data, what a key needs to be released by `algo` at this budget and Δ0.

    `keys_per_user` lists the k values of the users table (default 1, 2, 5, … up to Δ0).
    """
    mech = mechanisms.get(algo)
    budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
    mech.check_budget(budget)
    max_contributions = _check_max_contributions(max_contributions)
    # Explaining runs nothing, so mechanisms kept only as baselines are explained too (with their caution).
    params = mech.check_params(algo_params | {"allow_unproven": True} if mech.unproven else algo_params)
    holdings = default_holdings(max_contributions) if keys_per_user is None else _check_holdings(keys_per_user,
                                                                                                 max_contributions)
    return _explain_plan(mech, budget, max_contributions, params, holdings)


def release_section(release) -> list[str]:
    """The lines `Release.report()` appends (none for entry points outside the registry)."""
    found = explain_release(release)
    return ["", *found.lines()] if found is not None else []


def explain_release(release) -> Explanation | None:
    """The explanation of a finished `Release` for k = 1, 10, Δ0 (None outside the registry, e.g. count release)."""
    mech = mechanisms.MECHANISMS.get(release.algo)
    if mech is None or release.max_contributions is None:
        return None
    compact = sorted({k for k in (1, 10, release.max_contributions) if k <= release.max_contributions})
    return _explain_plan(mech, release.budget, release.max_contributions, dict(release.params), compact)


__all__ = ["explain", "explain_release", "Explanation", "RoundExplanation", "UsersNeeded"]
