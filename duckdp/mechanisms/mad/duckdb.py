"""MAD and MAD2R's own stages on DuckDB (templates in ./sql; spec docs/specs/mad-mad2r.md)."""
from __future__ import annotations

from ...stages import Query
from ...stages.duckdb import DuckDBStages, merge
from ..base import RoundPlan
from . import SCREEN_COLUMNS, screen_exceptions


def mad_vectors(engine: DuckDBStages, kept: Query) -> Query:
    """Stored user vectors (`_dp_user`, keys, `_dp_d`, `_dp_uw` = 1/√d) [mad_vectors.sql; spec §2, §4]."""
    return engine.store(engine.query("mad_vectors", {"kept": kept.sql, "keys": engine.ctx.key_aliases}, kept.params),
                        "vectors")


def mad_weights(engine: DuckDBStages, vectors: Query, plan: RoundPlan) -> Query:
    """MAD stages 1–4 over stored user vectors → (keys, `_dp_w`) [mad_weights.sql; spec §5]."""
    x = plan.extra
    return engine.query("mad_weights", {"bounded": engine.table_name(vectors), "keys": engine.ctx.key_aliases},
                        {"min_degree": x.min_degree, "max_degree": x.max_degree, "tau": x.tau,
                         "reroute": x.reroute})


def mad2r_screen(engine: DuckDBStages, pairs: Query, vectors: Query, plan1: RoundPlan, plan2: RoundPlan,
                 max_contributions: int) -> Query:
    """Round-1 noisy weights ŵ1 on the whole universe (support ∪ keys of users over Δ0)
    [mad2r_universe.sql], MAD2R's decisions by the generic `decide` stage with `screen_round1`, and
    only the exceptions (released, removed or biased keys) stored [mad2r_status.sql]."""
    ctx = engine.ctx
    keys = ctx.key_aliases
    weighted = mad_weights(engine, vectors, plan1)
    universe = engine.query("mad2r_universe", {"weighted": weighted.sql, "pairs": engine.table_name(pairs),
                                               "keys": keys},
                            merge(weighted.params, {"max_contributions": max_contributions}))
    exceptions = engine.decide(universe, plan1, screen_exceptions(plan1, plan2), SCREEN_COLUMNS)
    target = ctx.temp_table("status")
    ctx.execute("mad2r_status", {"target": target, "universe": universe.sql, "keys": keys}, universe.params)
    # the insert casts keys back to the input's types (HUGEINT, UUID, BLOB, lists, structs)
    ctx.con.execute(f"INSERT INTO temp.main.{target} BY NAME SELECT * FROM {engine.table_name(exceptions)}")
    engine.drop(exceptions)
    return engine.table(target)


def mad2r_vectors(engine: DuckDBStages, pairs: Query, status: Query, max_contributions: int, beta_min: float,
                  beta_max: float) -> Query:
    """Stored round-2 user vectors (`_dp_user`, keys, `_dp_d`, `_dp_v`, `_dp_uw`, `_dp_biased`)
    [mad2r_remaining.sql, mad2r_vectors.sql, mad2r_biased.sql written in place by mad2r_set_biased.sql;
    spec §6, §4]."""
    ctx = engine.ctx
    keys = ctx.key_aliases
    remaining = engine.query("mad2r_remaining", {"pairs": engine.table_name(pairs), "keys": keys,
                                                 "status": engine.table_name(status),
                                                 "carried": ", p._dp_h" if ctx.ids_joined else ""},
                             {"beta_min": beta_min})
    kept = engine.truncate(engine.sized(remaining), max_contributions)
    vectors = engine.store(engine.query("mad2r_vectors", {"kept": kept.sql, "keys": keys}, kept.params), "vectors2")
    target = engine.table_name(vectors)
    biased = engine.query("mad2r_biased", {"vectors": target, "keys": keys}, {"beta_max": beta_max})
    ctx.execute("mad2r_set_biased", {"target": target, "biased": biased.sql, "match": ctx.key_match("t", "s")},
                biased.params)
    return vectors


def mad2r_released(engine: DuckDBStages, status: Query) -> Query:
    """The keys MAD2R round 1 released (O1) [mad2r_released.sql]."""
    return engine.query("mad2r_released", {"status": engine.table_name(status), "keys": engine.ctx.key_aliases})
