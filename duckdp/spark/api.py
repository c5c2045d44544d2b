"""Spark entry points behind `duckdp.select` and `duckdp.count_release` (validated and planned there)."""
from __future__ import annotations

from ..errors import InvalidParameter
from ..mechanisms.policy import _Sequential
from ..release import Release
from . import executor_errors, use_driver_python
from .source import check_nulls, resolve
from .stages import SEQUENTIAL_ERROR, SparkStages


def select(spark, table, mech, budget, plan, params, prepare, randomness, user_col, item_col, on_plan) -> Release:
    """Resolve → (Session hook, charged `plan`) → NULL check → `prepare(stages)` (the run's plan, params
    and automatic Δ0 choice, if any) → `mech.run` on Spark stages → Release."""
    from ..api import auto_params, spent_of

    if isinstance(mech, _Sequential):          # a clear error before the Session charges or data is read
        raise InvalidParameter(SEQUENTIAL_ERROR)
    use_driver_python(spark)
    source = resolve(spark, table, user_col, item_col)
    stages = SparkStages(spark, source, randomness)
    try:
        if on_plan is not None:
            on_plan(plan, source.description)
        check_nulls(source)
        with executor_errors():
            run_plan, run_params, choice = prepare(stages)
            out, rounds = mech.run(stages, run_plan, run_params)
    finally:
        stages.close()
    return Release(items=spark.createDataFrame(out), algo=mech.name, citation=mech.citation, budget=budget,
                   spent=spent_of(rounds, choice), rounds=rounds, seeded=randomness.seeded,
                   max_contributions=run_params["max_contributions"], params=params | auto_params(choice),
                   input=source.description, key_names=list(source.key_names), caveat=mech.unproven, plan=run_plan,
                   auto=choice, _table=out)


def count_release(spark, table, budget, params, randomness, user_col, item_col, on_plan):
    """Private Count Release (count_release.py) with the k̄ + 1 largest counts computed by Spark
    (sql/pcr_top_counts.sql: distinct users per key, ties by a keyed hash) and Alg. 2 in numpy."""
    from ..count_release import check_output_names, release_top_counts

    use_driver_python(spark)
    source = resolve(spark, table, user_col, item_col)
    check_output_names(source.key_names)
    if on_plan is not None:
        on_plan([budget], source.description)
    check_nulls(source)
    with executor_errors():
        top = SparkStages(spark, source, randomness).top_counts(params["kbar"] + 1)
    return release_top_counts(top, source.keys, source.key_names, source.description, budget, params, randomness,
                              lambda t, cols: spark.createDataFrame(t).orderBy(*cols).toArrow(),
                              spark.createDataFrame)
