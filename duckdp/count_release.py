"""`count_release()`: keys with noisy distinct-user counts and no contribution bound (Rogers 2024).

validate → plan (no data) → open the engine's run → `mech.run(engine, …)` → one CountRelease builder,
as `select` does. The mechanism, Private Count Release (Alg. 2 with Unknown-Domain Gumbel), its
privacy argument and its own stages live in duckdp/mechanisms/count_release/; it is registered apart
from the key-set mechanisms (`mechanisms.get(..., output=...)`), so `select` refuses it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import mechanisms
from .engines import EngineKind, engine_for
from .errors import InternalError, SchemaError
from .mechanisms.base import Params, Round
from .mechanisms.count_release import CountRound, ledger_rounds
from .privacy.accountant import Accountant, nominal_spent, plan_hook
from .privacy.budget import ZCDP, make_budget
from .privacy.events import PrivacyEvent, budget_event
from .release import Release
from .rng import Randomness
from .source import Source

if TYPE_CHECKING:
    from .engines import Connection
    from .mechanisms.base import Mechanism
    from .spark.source import SparkSource

_OUTPUT_COLUMNS = ("noisy_count", "sigma")


@dataclass
class CountRelease(Release):
    """A `Release` whose items carry `noisy_count` and `sigma`, plus the step-by-step `ledger`.

    `spent` is the filter's guarantee (ρ, δ) (Rogers Thm 6) with its (ε, δ) conversion;
    `ledger` (Arrow) has one row per Gumbel call or Gaussian count with its charge (`item`: the row of
    `items`, listed by key, that the step released).
    `max_contributions` is None: counts need no ℓ0 bound.
    """

    ledger: pa.Table = field(kw_only=True, repr=False)

    @property
    def event(self) -> PrivacyEvent:
        """The filter's guarantee (Rogers 2024 Thm 6): δ-approximate ρ-zCDP at the budget."""
        return budget_event(self.budget)

    @property
    def ledger_rho(self) -> float:
        return math.fsum(self.ledger.column("rho").to_pylist())

    @property
    def ledger_delta(self) -> float:
        return math.fsum(self.ledger.column("delta").to_pylist())

    def report(self) -> str:
        mech = self.ledger.column("mechanism").to_pylist()
        calls, counts = mech.count("gumbel"), mech.count("gaussian")
        lines = ["  Δ0        : none (distinct-user counts, ℓ∞ sensitivity 1, any number of keys per user)"
                 if line.startswith("  Δ0") else line for line in super().report().splitlines()]
        lines.insert(-1, f"  ledger    : {calls:,} Gumbel calls ({calls - counts:,} ⊥), {counts:,} Gaussian counts; "
                         f"charged ρ={self.ledger_rho:.6g}, δ={self.ledger_delta:.3g} (filter: ≤ budget)")
        return "\n".join(lines)


def count_release(con: Connection, table: object, *, rho: float, delta: float, user_col: str = "user_id",
                  item_col: str | list[str] = "item", seed: int | None = None,
                  initial_epsilon: float = 5e-4, delta_per_call: float = 1e-11, kbar: int = 10_000,
                  relative_error: float = 0.1, accountant: Accountant | None = None) -> CountRelease:
    """Release keys of `table` with noisy distinct-user counts under δ-approximate ρ-zCDP.

    Defaults are the paper's (Rogers §4): ε* = 0.0005, δ* = 1e-11, k̄ = 10,000, r = 0.1.
    `initial_epsilon` is ε* (the first Gumbel call's ε), `delta_per_call` is δ* (charged per
    Gumbel call), `kbar` is k̄ (keys cached and searched), `relative_error` is the target r of
    eq. (2). Alg. 2 needs ρ > ε*²/4 and δ > δ*. The input is only read; `seed` makes the release
    reproducible (tests and demos; the release says it was seeded). `accountant`
    (privacy/accountant.py; a Session passes its own) is charged the filter's guarantee ZcdpEvent(ρ, δ)
    once the input is resolved and before any data is read.
    """
    mech = mechanisms.get("pcr", output=mechanisms.COUNTS)
    budget = make_budget(rho=rho, delta=delta)
    if not isinstance(budget, ZCDP):
        raise InternalError("invariant failed: rho= always builds a ZCDP budget")
    params = Params(None, mech.check_params({"initial_epsilon": initial_epsilon,      # no Δ0: counts need none
                                             "delta_per_call": delta_per_call, "kbar": kbar,
                                             "relative_error": relative_error}))
    plan = mech.plan(budget, params)                           # Alg. 2's preconditions, before any data
    randomness = Randomness(seed)
    on_plan = plan_hook(accountant, mech.name, budget_event(budget))   # the filter's guarantee (Thm 6)
    kind = engine_for(con)
    mech.check_engine(kind.name)

    def check_columns(source: Source) -> None:
        check_output_names(source.key_names)

    with kind.open_run(con, table, user_col, item_col, randomness, plan=[budget], on_plan=on_plan,
                       check_source=check_columns) as stages:
        found, rounds = mech.run(stages, plan, params)
        source = stages.source
    return build_count_release(kind, con, mech, source, found, rounds, budget, params, randomness)


def check_output_names(key_names: Sequence[str]) -> None:
    """Refuse key columns named like the release's own output columns."""
    clash = sorted(set(key_names) & set(_OUTPUT_COLUMNS))
    if clash:
        raise SchemaError(f"item_col {clash} collides with the output columns {list(_OUTPUT_COLUMNS)}; rename it")


def build_count_release(kind: EngineKind, con: Connection, mech: Mechanism, source: Source | SparkSource,
                        found: pa.Table, rounds: list[Round], budget: ZCDP, params: Params,
                        randomness: Randomness) -> CountRelease:
    """THE CountRelease of a count release run, on any engine (`found`: keys in the order found).

    Items are listed by key, as every release is (the order of discovery would be covered by Alg. 2's
    guarantee, but a key order makes the listing a function of the released keys and counts only),
    sorted in the engine's order; the ledger's `item` is the released key's row in `items`.
    """
    key_cols = [f"_dp_k{i}" for i in range(len(source.key_names))]
    steps = [r.steps for r in rounds if isinstance(r, CountRound)]
    if len(steps) != len(rounds) or not steps:
        raise InternalError("invariant failed: count release has at least one Gumbel level, each with its steps")
    ledger = pa.concat_tables(steps).combine_chunks()
    discovered = found.select(key_cols).append_column("_dp_found", pa.array(np.arange(found.num_rows), pa.int64()))
    ordered = kind.sort_by(con, discovered, key_cols)
    order = ordered.column("_dp_found").to_numpy()                  # discovery index of each sorted row
    row = np.empty_like(order)
    row[order] = np.arange(order.size)
    items = (ordered.select(key_cols).rename_columns(list(source.key_names))
             .append_column("noisy_count", pa.array(found.column("noisy_count").to_numpy()[order], pa.int64()))
             .append_column("sigma", pa.array(found.column("sigma").to_numpy()[order], pa.float64())))
    ledger = ledger.set_column(ledger.schema.get_field_index("item"), "item",
                               pc.take(pa.array(row, pa.int64()), ledger.column("item")))
    return CountRelease(items=kind.relation(con, items, list(source.key_names)), algo=mech.name,
                        citation=mech.citation, budget=budget, spent=nominal_spent(budget_event(budget)),
                        rounds=ledger_rounds(ledger), seeded=randomness.seeded,
                        max_contributions=params.max_contributions,
                        params=dict(params), input=source.description, key_names=list(source.key_names),
                        _table=items, ledger=ledger)
