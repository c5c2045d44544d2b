"""What a key needs to be released, from the plan alone (no data): thresholds in weight units and in users.

Each mechanism states what its rounds guarantee in users (`Mechanism.explain_round` and
`explain_overall`, duckdp/mechanisms/guarantee.py: the Basic bound P(N·k^(−e) + noise ≥ T) and
how each mechanism relates to it); this module only tabulates, per round and for each k, the
smallest N with release probability ≥ 50 % and ≥ 95 %. A finished `Release` is explained from
the plan its run used.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from . import mechanisms
from .errors import InvalidParameter
from .mechanisms.base import Params
from .privacy.budget import Budget, make_budget
from .privacy.composition import composition_lines
from .validation import integer
from .validation import max_contributions as check_max_contributions
from .validation import truncation as check_truncation

if TYPE_CHECKING:
    from .mechanisms.base import Mechanism, RoundPlan
    from .release import Release

TARGETS = (0.5, 0.95)
_MAX_USERS = 10**15      # beyond this a key is treated as never reaching the target

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
    truncation: str = "per_user"                             # the order users over Δ0 keep keys in (select's)

    def release_probability(self, n_users: ArrayLike, keys_per_user: int, round: int | None = None) -> np.ndarray:
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
        order = ", one global key order" if self.truncation == "global" else ""     # as Release.report()
        head = [f"duckdp explain — {self.algo}: {self.budget}, Δ0 = {self.max_contributions}{order}",
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


def _users(probability: Callable[[np.ndarray, int], np.ndarray], holdings: list[int],
           exponent: float) -> list[UsersNeeded]:
    rows = []
    for k in holdings:
        def at_k(n: np.ndarray, k: int = k) -> np.ndarray:
            return probability(n, k)

        targets = [smallest_users(at_k, t) for t in TARGETS]
        rows.append(UsersNeeded(k, float(k) ** -exponent, *targets))
    return rows


def _truncation_note(truncation: str, max_contributions: int) -> str:
    """How a user over Δ0 keeps keys under `truncation` (spec private-group-by.md §7). The users tables are
    the same under both orders (their holders have k ≤ Δ0 keys, so truncation keeps all of them), and so are
    σ and T: the order changes which keys heavy users keep, never the sensitivity."""
    if truncation == "global":
        return (f"users with k > Δ0 = {max_contributions} keys keep the first Δ0 of them in one secret order of "
                "the keys (fresh per round), the same for every user: each holds a given key with probability "
                "Δ0/k, but not independently — a key early in the order is kept by all its holders, a late one "
                "by few; σ and T are those of truncation='per_user'")
    return (f"users with k > Δ0 = {max_contributions} keys keep a uniform random Δ0 of them, so each "
            "holds a given key with probability Δ0/k")


def _explain_plan(mech: Mechanism, budget: Budget, params: Params, holdings: list[int],
                  plans: list[RoundPlan] | None = None, truncation: str = "per_user") -> Explanation:
    """Tabulate `mech`'s own per-round guarantees for `plans` (default: a fresh data-free plan)."""
    max_contributions = params.delta0
    plans = mech.plan(budget, params) if plans is None else plans
    exponent = mech.exponent or 0.0
    guarantees = [mech.explain_round(i, plan, params) for i, plan in enumerate(plans)]
    rounds = []
    for i, (plan, g) in enumerate(zip(plans, guarantees, strict=True)):
        r = RoundExplanation(i, plan.budget, plan.noise, plan.scale, plan.threshold, g.kind, g.weighting,
                             notes=list(g.notes), probability=g.probability)
        if r.probability is not None:
            r.users = _users(r.probability, holdings, exponent)
        rounds.append(r)
    overall_fn, notes = mech.explain_overall(guarantees)
    overall = [] if overall_fn is None else (rounds[0].users if overall_fn is rounds[0].probability
                                             else _users(overall_fn, holdings, exponent))
    if mech.truncates:
        notes.append(_truncation_note(truncation, max_contributions))
    if mech.unproven:
        notes.append("caution: " + mech.unproven)
    mus = [p.mu for p in plans if p.mu is not None]
    composition = composition_lines(budget, [p.scale for p in plans], mus) if len(mus) == len(plans) else []
    return Explanation(mech.name, mech.citation, budget, max_contributions, dict(params), rounds, overall, notes,
                       overall_fn, composition, truncation)


def _check_holdings(keys_per_user: object, max_contributions: int) -> list[int]:
    """k values must be integers in [1, Δ0]: above Δ0 truncation makes a key's presence random."""
    values = [] if isinstance(keys_per_user, (str, bytes)) or not isinstance(keys_per_user, Iterable) \
        else list(keys_per_user)
    if not values:
        raise InvalidParameter(f"keys_per_user must be a non-empty list of integers in [1, max_contributions="
                               f"{max_contributions}], got {keys_per_user!r}")
    return sorted({integer("keys_per_user entries", k, 1, max_contributions) for k in values})


def explain(algo: str, *, epsilon: float | None = None, rho: float | None = None, delta: float | None = None,
            max_contributions: int = 100, keys_per_user: list[int] | None = None, truncation: str = "per_user",
            **algo_params: Any) -> Explanation:
    """Explain, without data, what a key needs to be released by `algo` at this budget and Δ0.

    `keys_per_user` lists the k values of the users table (default 1, 2, 5, … up to Δ0). `truncation` is
    select()'s: the order a user over Δ0 keeps keys in; it changes the note on such users, not σ, T or the
    tables (their holders are not truncated).
    """
    mech = mechanisms.get(algo)
    budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
    mech.check_budget(budget)
    check_truncation(truncation)
    if truncation != "per_user" and not mech.truncates:        # as select() refuses it
        raise InvalidParameter(f"{mech.name} does not bound users to Δ0 keys; truncation={truncation!r} does not apply")
    max_contributions = check_max_contributions(max_contributions)
    # Explaining runs nothing, so mechanisms kept only as baselines are explained too (with their caution).
    params = Params(max_contributions,
                    mech.check_params(algo_params | {"allow_unproven": True} if mech.unproven else algo_params))
    holdings = default_holdings(max_contributions) if keys_per_user is None else _check_holdings(keys_per_user,
                                                                                                 max_contributions)
    return _explain_plan(mech, budget, params, holdings, truncation=truncation)


def release_section(release: Release) -> list[str]:
    """The lines `Release.report()` appends (none for entry points outside the registry)."""
    found = explain_release(release)
    return ["", *found.lines()] if found is not None else []


def explain_release(release: Release) -> Explanation | None:
    """The explanation of a finished `Release` for k = 1, 10, Δ0 (None outside the registry, e.g. count release)."""
    mech = mechanisms.MECHANISMS.get(release.algo)
    if mech is None or release.max_contributions is None or not release.plan:
        return None
    compact = sorted({k for k in (1, 10, release.max_contributions) if k <= release.max_contributions})
    return _explain_plan(mech, release.budget, Params(release.max_contributions, release.params), compact,
                         release.plan, release.truncation)


__all__ = ["explain", "explain_release", "Explanation", "RoundExplanation", "UsersNeeded"]
