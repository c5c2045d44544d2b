"""`select()`: validate → plan (no data) → open the engine's run → `mech.run(engine, …)` → one Release builder.

Engine-blind: `duckdp.engines.engine_for(con)` picks DuckDB or Spark, and the mechanism's declared
engines are checked before any budget is charged or data read.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import mechanisms
from .engines import EngineKind, engine_for
from .errors import InternalError, InvalidParameter
from .mechanisms.base import Mechanism, Params, Round, plan_event
from .privacy import auto_contributions
from .privacy.accountant import Accountant, nominal_spent, plan_hook
from .privacy.budget import make_budget
from .release import Release, Spent
from .rng import Randomness
from .validation import max_contributions as check_max_contributions
from .validation import truncation as check_truncation

if TYPE_CHECKING:
    from .engines import Connection
    from .mechanisms.base import RoundPlan
    from .privacy.auto_contributions import AutoChoice
    from .privacy.budget import Budget
    from .source import Source
    from .spark.source import SparkSource
    from .stages.base import Engine


def algorithms() -> list[dict]:
    """Every mechanism with its citation, accepted budgets and parameters."""
    return [m.describe() for m in mechanisms.MECHANISMS.values()]


def select(con: Connection, table: object, *, algo: str, epsilon: float | None = None, delta: float | None = None,
           rho: float | None = None, max_contributions: int | str = 100, user_col: str = "user_id",
           item_col: str | list[str] = "item", seed: int | None = None,
           auto_share: float = auto_contributions.DEFAULT_SHARE, accountant: Accountant | None = None,
           truncation: str = "per_user", **algo_params: Any) -> Release:
    """Release keys of `table` under user-level (ε, δ)-DP or δ-approximate ρ-zCDP.

    `table` is a table or view name, a DuckDBPyRelation, or any object DuckDB can register
    (pandas/polars DataFrame, Arrow table). With a SparkSession as `con`, a Spark DataFrame or
    table name, run by duckdp.spark (the same plan; `items` is then a Spark DataFrame). The input
    is only read. `seed` makes the release reproducible (for tests and demos; the release says it was seeded).
    `max_contributions="auto"` spends the share `auto_share` of the budget on a private choice of Δ0
    (duckdp/privacy/auto_contributions.py) and the rest on the mechanism; the Release reports both.
    `accountant` (privacy/accountant.py; a Session passes its own) is charged the plan's privacy
    event once the input is resolved and before any data is read; BudgetExceeded there aborts the release.
    `truncation`: the order in which a user over Δ0 keeps keys — "per_user" (default: the Δ0 of smallest keyed
    hash of (user, key), a uniform subset per user) or "global" (the Δ0 of smallest keyed hash of the key alone,
    one secret order of the keys, fresh per round, for every user). Both are private for every mechanism
    (DESIGN §3); which releases more depends on the data (benchmarks/RESULTS.md "Truncation order").
    """
    mech = mechanisms.get(algo)
    kind = engine_for(con)
    mech.check_engine(kind.name)                               # before any charge or read
    budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
    mech.check_budget(budget)
    check_truncation(truncation)
    if truncation != "per_user" and not mech.truncates:
        raise InvalidParameter(f"{mech.name} does not bound users to Δ0 keys; truncation={truncation!r} does not apply")
    auto = auto_contributions.is_auto(max_contributions)
    fixed: int | None = None                  # Δ0 when given (None: chosen privately, 'auto')
    if auto:
        auto_contributions.check_share(auto_share)
        if not mech.truncates:
            raise InvalidParameter(f"{mech.name} does not bound users to Δ0 keys; max_contributions='auto' "
                                   "does not apply")
    else:
        if isinstance(max_contributions, str):
            raise InvalidParameter(f"max_contributions must be an integer >= 1 or 'auto', got {max_contributions!r}")
        fixed = check_max_contributions(max_contributions)
        if auto_share != auto_contributions.DEFAULT_SHARE:
            raise InvalidParameter("auto_share applies only with max_contributions='auto'")
    settings = mech.check_params(algo_params)

    def planner(b: Budget, d: int) -> list[RoundPlan]:
        return mech.plan(b, Params(d, settings))

    auto_plan, params = None, None
    if fixed is None:                                          # the estimate and the mechanism, planned together
        auto_plan, plan = auto_contributions.plan(budget, auto_share, planner)
        charged = [auto_plan.round_plan(), *plan]
    else:
        params = Params(fixed, settings)                       # what plan and run both read
        plan = charged = mech.plan(budget, params)             # all σ and T before data is read
    randomness = Randomness(seed)
    on_plan = plan_hook(accountant, mech.name, plan_event(charged))

    def prepare(stages: Engine) -> tuple[list[RoundPlan], Params, AutoChoice | None]:
        """(plan, run params, choice) once data may be read: the Δ0 estimate first where asked."""
        if params is not None:
            return plan, params, None
        if auto_plan is None:
            raise InternalError("invariant failed: an automatic Δ0 has its estimate planned")
        choice = auto_contributions.estimate(stages, auto_plan, randomness.key)
        final = auto_contributions.finish(choice, plan, planner)
        return final, Params(choice.max_contributions, settings), choice

    with kind.open_run(con, table, user_col, item_col, randomness, plan=charged, on_plan=on_plan,
                       truncation=truncation) as stages:
        run_plan, run_params, choice = prepare(stages)
        table_out, rounds = mech.run(stages, run_plan, run_params)
        source = stages.source
    return build_release(kind, con, mech, source, table_out, rounds, budget, run_plan, run_params, choice, randomness,
                         truncation)


def build_release(kind: EngineKind, con: Connection, mech: Mechanism, source: Source | SparkSource, table_out: pa.Table,
                  rounds: list[Round], budget: Budget, run_plan: list[RoundPlan], run_params: Params,
                  choice: AutoChoice | None, randomness: Randomness, truncation: str = "per_user") -> Release:
    """THE Release of a mechanism's run, on any engine (`items`: the engine's relation, listed by key)."""
    return Release(items=kind.relation(con, table_out, source.key_names), algo=mech.name, citation=mech.citation,
                   budget=budget, spent=spent_of(rounds, choice), rounds=rounds, seeded=randomness.seeded,
                   max_contributions=run_params.max_contributions, params=dict(run_params) | auto_params(choice),
                   input=source.description, key_names=list(source.key_names), caveat=mech.unproven,
                   plan=run_plan, auto=choice, truncation=truncation, _table=table_out)


def spent_of(rounds: list[Round], choice: AutoChoice | None) -> Spent:
    """The rounds' budgets and the Δ0 estimate's (last, so the exact partial sums of split budgets stay exact)."""
    return nominal_spent(plan_event(rounds + ([choice.plan.round_plan()] if choice is not None else [])))


def auto_params(choice: AutoChoice | None) -> dict:
    """What `params` records about an automatic Δ0 (nothing for a fixed one)."""
    return {} if choice is None else {"auto_contributions": choice.as_dict()}


__all__ = ["Round", "algorithms", "select"]
