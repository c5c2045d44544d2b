"""Adaptive SIPS's own stages on Spark: steps 1, 3 and 4 and the universe are the DuckDB templates
themselves (./sql, run by `spark.sql` through `SparkStages.template`); only the stored state is built
with the DataFrame API (spec docs/specs/adaptive-sips.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...spark.stages import SparkStages
from ..base import Params, RoundPlan
from . import STATE_COLUMNS, state_rule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def lazy_rounds(engine: SparkStages, params: Params, salts: list[int]) -> None:
    """None: Spark draws every round's noise on every key of ∪R_u (the DuckDB stages may draw it lazily)."""
    return None


def remaining(engine: SparkStages, pairs: DataFrame, state: DataFrame | None, salt: int,
              lazy: None = None) -> DataFrame:
    """Step 1, R_u with each key's level: every pair at level 1 in round 1 (the template adaptive_sips_first.sql),
    else the pairs whose key is in play in `state` (adaptive_sips_remaining.sql). `salt`, the round's
    truncation salt, orders only lazy noise's candidates (DuckDB); Spark has none."""
    if state is None:
        return engine.template("adaptive_sips_first", {"pairs": pairs}, {})
    return engine.template("adaptive_sips_remaining", {"pairs": pairs, "state": state}, {},
                           fragments={"match": engine.key_match("p", "s"), "exclude": ""})


def vectors(engine: SparkStages, kept: DataFrame, cap: float, uniform: bool = False) -> DataFrame:
    """Step 3, each user's capped unit-norm vector over R̃_u: the DuckDB template
    adaptive_sips_vectors.sql itself, run by `spark.sql` (benchmarks/bench_spark_template.py); `uniform`
    (round 1: every level 1, c = 1) the same numbers, 1/√d, by adaptive_sips_vectors_uniform.sql."""
    if uniform:
        return engine.template("adaptive_sips_vectors_uniform", {"kept": kept}, {}, subqueries=("kept",))
    return engine.template("adaptive_sips_vectors", {"kept": kept}, {"cap": cap}, subqueries=("kept",))


def weights(engine: SparkStages, vectors: DataFrame) -> DataFrame:
    """Step 4, w_i = Σ_u x_ui over ∪R̃_u: the DuckDB template adaptive_sips_weights.sql, run by `spark.sql`."""
    return engine.template("adaptive_sips_weights", {"vectors": vectors}, {}, subqueries=("vectors",))


def state(engine: SparkStages, remaining: DataFrame, vectors: DataFrame, state: DataFrame | None, plan: RoundPlan,
          params: Params, index: int, lazy: None = None) -> tuple[DataFrame, int]:
    """Noise on every key of ∪R_u (the templates adaptive_sips_universe.sql over adaptive_sips_in_play_first.sql
    in round 1, else adaptive_sips_in_play.sql: the state's keys in play), the mechanism's rule
    (`next_state`) by the generic `decide` stage → stored state (keys in play or released this round,
    plus those released earlier: the DataFrame twin of adaptive_sips_state.sql, _decided.sql and
    _carry.sql, DuckDB inserts with no Spark SQL form; tests/test_contract_spark.py ties them over two
    rounds) and the number released this round."""
    from pyspark.sql import functions as F

    in_play = (engine.template("adaptive_sips_in_play_first", {"remaining": remaining}, {}, subqueries=("remaining",))
               if state is None else engine.template("adaptive_sips_in_play", {"state": state}, {}))
    universe = engine.template("adaptive_sips_universe", {"in_play": in_play, "weighted": weights(engine, vectors)},
                               {}, subqueries=("in_play", "weighted"))
    decided = engine.store(engine.decide(universe, plan, state_rule(plan, params), STATE_COLUMNS))
    count = decided.where(F.col("_dp_released")).count()
    new = decided.select(*engine.keys, "_dp_level",
                         F.when(F.col("_dp_released"), F.lit(index)).cast("int").alias("_dp_round"))
    if state is not None:           # the keys earlier rounds released stay in the output
        new = new.unionByName(state.where(F.col("_dp_round").isNotNull()))
    return engine.store(new), int(count)


def released(engine: SparkStages, state: DataFrame) -> DataFrame:
    """The keys a state records as released: the template adaptive_sips_released.sql."""
    return engine.template("adaptive_sips_released", {"state": state}, {})
