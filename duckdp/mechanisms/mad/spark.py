"""MAD and MAD2R's own stages on Spark: every formula is the DuckDB template itself (./sql, run by
`spark.sql` through `SparkStages.template`; benchmarks/bench_spark_template.py); the DataFrame API only
chains them (spec docs/specs/mad-mad2r.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...spark.stages import SparkStages
from ..base import RoundPlan
from . import SCREEN_COLUMNS, screen_exceptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def mad2r_lazy(engine: SparkStages, pairs: DataFrame, max_contributions: int, plan1: RoundPlan,
               plan2: RoundPlan) -> bool:
    """False: Spark screens every key of MAD2R's round-1 universe (the DuckDB stages may screen some lazily)."""
    return False


def mad_vectors(engine: SparkStages, kept: DataFrame) -> DataFrame:
    """Stored user vectors with w^u_i = 1/√d_u: the template mad_vectors.sql (spec §2 step 1, §4)."""
    return engine.store(engine.template("mad_vectors", {"kept": kept}, {}, subqueries=("kept",)))


def mad_weights(engine: SparkStages, vectors: DataFrame, plan: RoundPlan) -> DataFrame:
    """MAD stages 1–4 (spec §5): truncate at τ, return excess, reroute f — the template mad_weights.sql."""
    x = plan.extra
    return engine.template("mad_weights", {"bounded": vectors},
                           {"min_degree": x.min_degree, "max_degree": x.max_degree, "tau": x.tau,
                            "reroute": x.reroute})


def mad2r_screen(engine: SparkStages, pairs: DataFrame, vectors: DataFrame, plan1: RoundPlan, plan2: RoundPlan,
                 max_contributions: int, lazy: bool = False) -> tuple[DataFrame, None]:
    """Round-1 weights ŵ1 on the whole universe (∪S̃_u and the keys of users over Δ0: the template
    mad2r_universe.sql), MAD2R's decisions by the generic `decide` stage with `screen_round1`, and
    only the exceptions (released, removed or biased) stored; no late draw (Spark's round 1 is eager)."""
    universe = engine.template("mad2r_universe", {"weighted": mad_weights(engine, vectors, plan1), "pairs": pairs},
                               {"max_contributions": max_contributions}, subqueries=("weighted",))
    return engine.store(engine.decide(universe, plan1, screen_exceptions(plan1, plan2), SCREEN_COLUMNS)), None


def mad2r_vectors(engine: SparkStages, pairs: DataFrame, status: DataFrame, max_contributions: int, beta_min: float,
                  beta_max: float, salt: int, cuts: None = None) -> DataFrame:
    """Stored round-2 user vectors (spec §4, §6): round-2 pairs (mad2r_remaining.sql) re-cut to Δ0
    (under `salt`, the mechanism's round-2 salt), v_i = b_i/√d for the kept pairs with b_i < 1 and 1/√d
    for the others in one statement (mad2r_vectors_biased.sql: the rows DuckDB has after writing the kept
    biases in place), the water-filling λ* for users with a bias below 1 (mad2r_biased.sql: every row of a
    user with a kept b_i < 1, flagged) in place of the unbiased users' 1/√d rows. `cuts`: none on Spark
    (its round 1 is eager)."""
    remaining = engine.template("mad2r_remaining", {"pairs": pairs, "status": status}, {},
                                fragments={"carried": ""})
    kept = engine.truncate(engine.sized(remaining), max_contributions, salt)
    # stored: read by the biased users' water-filling (twice) and for the unbiased users' rows
    vectors = engine.store(engine.template("mad2r_vectors_biased", {"kept": kept, "status": status},
                                           {"beta_min": beta_min}, subqueries=("kept",)))
    water = engine.template("mad2r_biased", {"vectors": vectors}, {"beta_max": beta_max})
    biased = vectors.where("_dp_biased").select("_dp_user")
    return engine.store(vectors.join(biased, "_dp_user", "left_anti").unionByName(water))


def mad2r_released(engine: SparkStages, status: DataFrame) -> DataFrame:
    """The keys MAD2R round 1 released (O1): the template mad2r_released.sql."""
    return engine.template("mad2r_released", {"status": status}, {})
