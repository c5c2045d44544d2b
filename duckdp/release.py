"""The Release object: released keys, privacy spent, per-round plan and a readable report."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from .explain import release_section
from .privacy.auto_contributions import AutoChoice
from .privacy.budget import ZCDP, Budget
from .privacy.composition import Spent, composition_lines
from .privacy.events import PrivacyEvent
from .templates import quote_ident

if TYPE_CHECKING:
    from .mechanisms.base import Round


def _budget_str(r: Round) -> str:
    """A round's budget; (ε, δ) rounds composed exactly show their μ_j and novel-key δ_j instead of the
    share of (ε, δ) they are charged (no guarantee of the round alone)."""
    b: Budget = r.budget
    if isinstance(b, ZCDP):
        return f"ρ={b.rho:.4g} δ={b.delta:.3g}"
    if r.mu is not None:
        return f"μ={r.mu:.4g} δ={r.novel_delta:.3g}"
    return f"ε={b.epsilon:.4g} δ={b.delta:.3g}"


def _composition(release: Release) -> list[str]:
    """The exact-composition lines of a release whose rounds all record μ_j (privacy/composition.py)."""
    if not release.rounds or any(r.mu is None for r in release.rounds):
        return []
    lines = composition_lines(release.budget, [r.sigma for r in release.rounds], [r.mu for r in release.rounds])
    return [f"  {'accounting' if i == 0 else '':<10}: {line}" for i, line in enumerate(lines)]


def by_key(con: duckdb.DuckDBPyConnection, table: pa.Table, key_names: list[str]) -> duckdb.DuckDBPyRelation:
    """A DuckDB relation over a released Arrow table that lists its rows sorted by the key columns under
    any connection setting (with `preserve_insertion_order=false` a plain Arrow scan may reorder rows)."""
    return con.from_arrow(table).order(", ".join(quote_ident(k) for k in key_names))


@dataclass
class Release:
    """The result of `duckdp.select`: released keys plus everything needed to audit the release.

    Order guarantee: `items`, `to_arrow()` and the CLI's files list the released keys sorted by the key
    columns (and `to_arrow()` is one contiguous chunk), so everything released is a function of the
    released set (and released numbers) and public parameters only — never of keys that were not
    released, of input order or of thread scheduling.
    """

    items: duckdb.DuckDBPyRelation      # the released keys, sorted by the key columns
    algo: str
    citation: str
    budget: Budget
    spent: Spent
    rounds: list
    seeded: bool
    max_contributions: int | None       # Δ0; None where no ℓ0 bound is used (count releases)
    params: dict = field(default_factory=dict)
    input: str = ""
    key_names: list = field(default_factory=list)
    caveat: str | None = None           # set for mechanisms run with allow_unproven=True
    plan: list = field(default_factory=list, repr=False)   # the RoundPlans the run used (for report())
    auto: AutoChoice | None = None      # the private Δ0 choice of max_contributions="auto" (its cost is in `spent`)
    truncation: str = "per_user"        # the order users over Δ0 keep keys in (select's `truncation`)
    _table: pa.Table | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self._table is not None:     # one chunk: the engine's batching can reflect keys it scanned
            self._table = self._table.combine_chunks()

    @property
    def event(self) -> PrivacyEvent:
        """The privacy event of the release (privacy/events.py): the Δ0 estimate, then every round."""
        from .mechanisms.base import plan_event
        rounds = ([self.auto.plan.round_plan()] if self.auto is not None else []) + list(self.rounds)
        return plan_event(rounds)

    def to_arrow(self) -> pa.Table:
        """The released keys as a pyarrow Table, sorted by the key columns, in one chunk."""
        return self._table if self._table is not None else self.items.to_arrow_table()

    def __len__(self) -> int:
        return sum(r.released for r in self.rounds)

    def report(self) -> str:
        """A readable summary: mechanism, budget, randomness, and each round's σ, T and count."""
        lines = [f"duckdp release — {self.algo}",
                 f"  mechanism : {self.citation}",
                 f"  input     : {self.input}  (keys: {', '.join(self.key_names)})",
                 f"  Δ0        : {self.max_contributions} keys per user"
                 + (", one global key order" if self.truncation == "global" else "")]
        if self.auto is not None:
            lines.append(f"  auto Δ0   : {self.auto.describe()}")
        shown = {k: v for k, v in self.params.items() if k != "auto_contributions"}
        if shown:
            lines.append("  params    : " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                                      for k, v in shown.items()))
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
            lines.append(f"  {r.index:>5}  {_budget_str(r):<22} {r.noise:<9} {r.sigma:>10.5g} "
                         f"{r.threshold:>11.6g} {r.released:>9,}")
        lines.append(f"  released {len(self):,} keys in total")
        lines += release_section(self)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<Release {self.algo}: {len(self):,} keys, spent {self.spent}"
                f"{', SEEDED' if self.seeded else ''}>")
