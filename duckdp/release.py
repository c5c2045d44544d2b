"""The Release object: released keys, privacy spent, per-round plan and a readable report."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from .explain import release_section
from .privacy.budget import Budget, EpsDelta, ZCDP
from .privacy.composition import composition_lines
from .privacy.conversions import approx_zcdp_epsilon


@dataclass(frozen=True)
class Spent:
    """Privacy spent. `epsilon`/`delta` always state (ε, δ)-DP; `rho`/`zcdp_delta` where zCDP was used.

    For zCDP, (ε, δ) is the DP-SIPS Corollary 9 conversion with δ' = δ (so δ_DP = δ + (1−δ)δ).
    """

    epsilon: float
    delta: float
    rho: float | None = None
    zcdp_delta: float | None = None

    @classmethod
    def of(cls, budgets: list[Budget]) -> "Spent":
        """Compose round budgets: additively for zCDP (Bun–Steinke Lemma 8.2 via DP-SIPS Lemma 6,
        δ's summed as an upper bound) and by basic composition for (ε, δ)-DP (Dwork–Roth Thm 3.16).
        Gaussian rounds composed exactly (privacy/composition.py) carry shares of the budget they were
        calibrated to jointly, so their sum is that budget."""
        if not budgets:
            raise ValueError("a release spends at least one round's budget")
        if all(isinstance(b, ZCDP) for b in budgets):
            rho = sum(b.rho for b in budgets)
            delta = min(sum(b.delta for b in budgets), 1.0)
            delta_dp = delta + (1 - delta) * delta
            return cls(approx_zcdp_epsilon(rho, delta, delta_dp), delta_dp, rho, delta)
        if all(isinstance(b, EpsDelta) for b in budgets):
            return cls(sum(b.epsilon for b in budgets), min(sum(b.delta for b in budgets), 1.0))
        raise ValueError("cannot compose a mix of zCDP and (ε, δ) rounds")

    def as_dict(self) -> dict:
        out = {"epsilon": self.epsilon, "delta": self.delta}
        if self.rho is not None:
            out |= {"rho": self.rho, "zcdp_delta": self.zcdp_delta}
        return out

    def __str__(self) -> str:
        dp = f"(ε={self.epsilon:.4g}, δ={self.delta:.3g})-DP"
        if self.rho is None:
            return dp
        return f"{self.zcdp_delta:.3g}-approximate {self.rho:.4g}-zCDP, which implies {dp}"


def _budget_str(b: Budget, extra: dict) -> str:
    """A round's budget; (ε, δ) rounds composed exactly show their μ_j and novel-key δ_j instead of the
    share of (ε, δ) they are charged (no guarantee of the round alone)."""
    if isinstance(b, ZCDP):
        return f"ρ={b.rho:.4g} δ={b.delta:.3g}"
    if "mu" in extra:
        return f"μ={extra['mu']:.4g} δ={extra['novel_delta']:.3g}"
    return f"ε={b.epsilon:.4g} δ={b.delta:.3g}"


def _composition(release) -> list[str]:
    """The exact-composition lines of a release whose rounds all record μ_j (privacy/composition.py)."""
    if not release.rounds or not all("mu" in r.extra for r in release.rounds):
        return []
    lines = composition_lines(release.budget, [r.sigma for r in release.rounds],
                              [r.extra["mu"] for r in release.rounds])
    return [f"  {'accounting' if i == 0 else '':<10}: {line}" for i, line in enumerate(lines)]


@dataclass
class Release:
    """The result of `duckdp.select`: released keys plus everything needed to audit the release."""

    items: object                       # DuckDBPyRelation of the released keys
    algo: str
    citation: str
    budget: Budget
    spent: Spent
    rounds: list
    seeded: bool
    max_contributions: int
    params: dict = field(default_factory=dict)
    input: str = ""
    key_names: list = field(default_factory=list)
    caveat: str | None = None           # set for mechanisms run with allow_unproven=True
    _table: pa.Table | None = field(default=None, repr=False)

    def to_arrow(self) -> pa.Table:
        """The released keys as a pyarrow Table."""
        return self._table if self._table is not None else self.items.to_arrow_table()

    def __len__(self) -> int:
        return sum(r.released for r in self.rounds)

    def report(self) -> str:
        """A readable summary: mechanism, budget, randomness, and each round's σ, T and count."""
        lines = [f"duckdp release — {self.algo}",
                 f"  mechanism : {self.citation}",
                 f"  input     : {self.input}  (keys: {', '.join(self.key_names)})",
                 f"  Δ0        : {self.max_contributions} keys per user"]
        if self.params:
            lines.append("  params    : " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                                      for k, v in self.params.items()))
        if self.caveat:
            lines.append(f"  CAUTION   : privacy NOT established — {self.caveat}")
        lines += [f"  budget    : {self.budget}",
                  f"  spent     : {self.spent}",
                  *_composition(self),
                  "  randomness: " + ("SEEDED — reproducible, for tests and demos only, not private"
                                      if self.seeded else "secure (key from os.urandom)"),
                  "",
                  f"  {'round':>5}  {'budget':<22} {'noise':<9} {'σ/λ':>10} {'threshold':>11} {'released':>9}"]
        for r in self.rounds:
            lines.append(f"  {r.index:>5}  {_budget_str(r.budget, r.extra):<22} {r.noise:<9} {r.sigma:>10.5g} "
                         f"{r.threshold:>11.6g} {r.released:>9,}")
        lines.append(f"  released {len(self):,} keys in total")
        lines += release_section(self)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<Release {self.algo}: {len(self):,} keys, spent {self.spent}"
                f"{', SEEDED' if self.seeded else ''}>")
