"""Adaptive SIPS's own stages on DuckDB (templates in ./sql; spec docs/specs/adaptive-sips.md)."""
from __future__ import annotations

from ...stages import Query
from ...stages.duckdb import DuckDBStages, merge
from ..base import Params, RoundPlan
from . import STATE_COLUMNS, state_rule


def remaining(engine: DuckDBStages, pairs: Query, state: Query | None) -> Query:
    """Step 1, R_u with `_dp_level`: every stored pair at level 1 in round 1 [adaptive_sips_first.sql],
    else the pairs whose key is in play in `state` [adaptive_sips_remaining.sql]."""
    if state is None:
        return engine.query("adaptive_sips_first", {"pairs": engine.table_name(pairs)})
    return engine.query("adaptive_sips_remaining", {"pairs": engine.table_name(pairs),
                                                    "state": engine.table_name(state),
                                                    "match": engine.ctx.key_match("p", "s")})


def vectors(engine: DuckDBStages, kept: Query, cap: float) -> Query:
    """Step 3, (`_dp_user`, keys, `_dp_x`): each user's capped unit-norm vector over R̃_u
    [adaptive_sips_vectors.sql]."""
    return engine.query("adaptive_sips_vectors", {"kept": kept.sql, "keys": engine.ctx.key_aliases},
                        merge(kept.params, {"cap": cap}))


def weights(engine: DuckDBStages, vectors: Query) -> Query:
    """Step 4, (keys, `_dp_w` = Σ_u x_ui) over ∪R̃_u [adaptive_sips_weights.sql]."""
    return engine.query("adaptive_sips_weights", {"vectors": vectors.sql, "keys": engine.ctx.key_aliases},
                        vectors.params)


def state(engine: DuckDBStages, remaining: Query, vectors: Query, state: Query | None, plan: RoundPlan, params: Params,
          index: int) -> tuple[Query, int]:
    """Noise on EVERY key of ∪R_u [adaptive_sips_universe.sql over adaptive_sips_in_play_first.sql in round 1,
    else adaptive_sips_in_play.sql: the state's keys in play], `next_state` by the generic `decide`
    stage → the stored next state (keys, `_dp_level`, `_dp_round`; released keys kept)
    [adaptive_sips_state.sql, adaptive_sips_decided.sql, adaptive_sips_carry.sql] and this round's
    number of released keys."""
    ctx = engine.ctx
    keys = ctx.key_aliases
    weighted = weights(engine, vectors)
    in_play = (engine.query("adaptive_sips_in_play_first", {"remaining": remaining.sql, "keys": keys},
                            remaining.params) if state is None else
               engine.query("adaptive_sips_in_play", {"state": engine.table_name(state), "keys": keys}))
    universe = engine.query("adaptive_sips_universe", {"in_play": in_play.sql, "weighted": weighted.sql,
                                                       "keys": keys}, merge(in_play.params, weighted.params))
    decided = engine.table_name(engine.decide(universe, plan, state_rule(plan, params), STATE_COLUMNS))
    target = ctx.temp_table("state")
    ctx.execute("adaptive_sips_state", {"target": target, "universe": universe.sql, "keys": keys}, universe.params)
    ctx.execute("adaptive_sips_decided", {"target": target, "decided": decided, "keys": keys}, {"round": index})
    if state is not None:             # the keys earlier rounds released stay in the output
        ctx.execute("adaptive_sips_carry", {"target": target, "state": engine.table_name(state), "keys": keys}, {})
    released = ctx.scalar(f"SELECT count(*) FROM {decided} WHERE _dp_released")
    ctx.drop(decided)                 # copied into the state: free it before the next round
    return engine.table(target), int(released)


def released(engine: DuckDBStages, state: Query) -> Query:
    """The keys a state records as released [adaptive_sips_released.sql]."""
    return engine.query("adaptive_sips_released", {"state": engine.table_name(state), "keys": engine.ctx.key_aliases})
