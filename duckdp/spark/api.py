"""Spark entry points behind `duckdp.select` and `duckdp.count_release` (validated and planned there)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import InvalidParameter, SchemaError
from ..mechanisms.policy import _Sequential
from ..release import Release, Spent
from .source import check_nulls, resolve
from .stages import SEQUENTIAL_ERROR, SparkStages


def select(spark, table, mech, budget, plan, params, run_params, randomness, user_col, item_col, on_plan) -> Release:
    """Resolve → (Session hook) → NULL check → `mech.run` on Spark stages → Release."""
    if isinstance(mech, _Sequential):          # a clear error before the Session charges or data is read
        raise InvalidParameter(SEQUENTIAL_ERROR)
    source = resolve(spark, table, user_col, item_col)
    stages = SparkStages(spark, source, randomness)
    try:
        if on_plan is not None:
            on_plan(plan, source.description)
        check_nulls(source)
        out, rounds = mech.run(stages, plan, run_params)
    finally:
        stages.close()
    return Release(items=spark.createDataFrame(out), algo=mech.name, citation=mech.citation, budget=budget,
                   spent=Spent.of([r.budget for r in rounds]), rounds=rounds, seeded=randomness.seeded,
                   max_contributions=run_params["max_contributions"], params=params, input=source.description,
                   key_names=list(source.key_names), caveat=mech.unproven, plan=plan, _table=out)


def count_release(spark, table, budget, params, randomness, user_col, item_col, on_plan):
    """Private Count Release (count_release.py) with the k̄ + 1 largest counts computed by Spark
    (sql/pcr_top_counts.sql: distinct users per key, ties by a keyed hash) and Alg. 2 in numpy."""
    from ..count_release import (
        _OUTPUT_COLUMNS,
        CITATION,
        CountRelease,
        ledger_rounds,
        private_count_release,
    )

    source = resolve(spark, table, user_col, item_col)
    clash = sorted(set(source.key_names) & set(_OUTPUT_COLUMNS))
    if clash:
        raise SchemaError(f"item_col {clash} collides with the output columns {list(_OUTPUT_COLUMNS)}; rename it")
    if on_plan is not None:
        on_plan([budget], source.description)
    check_nulls(source)
    keys = source.keys
    top = SparkStages(spark, source, randomness).top_counts(params["kbar"] + 1)
    counts = top.column("_dp_count").to_numpy().astype(np.int64)
    next_count = float(counts[params["kbar"]]) if counts.size > params["kbar"] else 0.0
    result = private_count_release(counts[:params["kbar"]], next_count, budget, randomness, **params)
    items = (top.select(keys).take(pa.array(result.positions, pa.int64())).rename_columns(source.key_names)
             .append_column("noisy_count", pa.array(result.noisy_counts, pa.int64()))
             .append_column("sigma", pa.array(result.sigmas, pa.float64())))
    return CountRelease(items=spark.createDataFrame(items), algo="pcr", citation=CITATION, budget=budget,
                        spent=Spent.of([budget]), rounds=ledger_rounds(result.ledger), seeded=randomness.seeded,
                        max_contributions=None, params=params, input=source.description,
                        key_names=list(source.key_names), _table=items, ledger=result.ledger)
