"""`select()`: validate → plan (no data) → resolve input → run the mechanism → Release."""
from __future__ import annotations

from . import mechanisms
from .lifecycle import open_run
from .mechanisms.base import Round
from .privacy.budget import make_budget
from .privacy.calibration import _check_max_contributions
from .release import Release, Spent, by_key
from .rng import Randomness
from .spark import is_spark_session


def algorithms() -> list[dict]:
    """Every mechanism with its citation, accepted budgets and parameters."""
    return [m.describe() for m in mechanisms.MECHANISMS.values()]


def select(con, table, *, algo: str, epsilon: float | None = None, delta: float | None = None,
           rho: float | None = None, max_contributions: int = 100, user_col: str = "user_id",
           item_col: str | list[str] = "item", seed: int | None = None, _on_plan=None, **algo_params) -> Release:
    """Release keys of `table` under user-level (ε, δ)-DP or δ-approximate ρ-zCDP.

    `table` is a table or view name, a DuckDBPyRelation, or any object DuckDB can register
    (pandas/polars DataFrame, Arrow table). With a SparkSession as `con`, a Spark DataFrame or
    table name, run by duckdp.spark (the same plan; `items` is then a Spark DataFrame). The input
    is only read. `seed` makes the release reproducible (for tests and demos; the release says it was seeded).
    `_on_plan(plan, input)` (internal, for Session) runs once the input is resolved and before
    any data is read; raising there aborts the release.
    """
    mech = mechanisms.get(algo)
    budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
    mech.check_budget(budget)
    max_contributions = _check_max_contributions(max_contributions)
    params = mech.check_params(algo_params)
    plan = mech.plan(budget, max_contributions, params)        # all σ and T before data is read
    randomness = Randomness(seed)
    run_params = params | {"max_contributions": max_contributions}
    if is_spark_session(con):                                  # the same plan, run by Spark stages
        from .spark.api import select as spark_select

        return spark_select(con, table, mech, budget, plan, params, run_params, randomness, user_col, item_col,
                            _on_plan)

    with open_run(con, table, user_col, item_col, randomness, plan=plan,
                  on_plan=_on_plan) as stages:
        source = stages.ctx.source
        table_out, rounds = mech.run(stages, plan, run_params)
    spent = Spent.of([r.budget for r in rounds])
    return Release(items=by_key(con, table_out, source.key_names), algo=mech.name, citation=mech.citation,
                   budget=budget, spent=spent, rounds=rounds, seeded=randomness.seeded,
                   max_contributions=max_contributions, params=params, input=source.description,
                   key_names=list(source.key_names),
                   caveat=mech.unproven, plan=plan, _table=table_out)


__all__ = ["Round", "algorithms", "select"]
