"""Adaptive SIPS's own stages on DuckDB (templates in ./sql; spec docs/specs/adaptive-sips.md).

Lazy noise (run with a `LazyRounds`, `lazy_rounds`): round j's noise of a key is the PRF value at
(round tag j, the key's counter), so it is the same whenever it is drawn. Each round draws it on
∪R̃_u (the keys with a weight, which can be released) and on the keys already noised that are still
in play; a key no round has noised yet, which every holder truncated away each time, gets its
earlier rounds' noise only when a later round needs its state, the truncation of a user who holds
it (`remaining`). The state keeps a row for every key noised (level 0 once out), so a missing row
means "not noised yet", not "dropped". Every draw is the one the eager rule (noise on every key of
∪R_u in every non-final round) makes, on the same counter with the same round's sub-key, and every
decision reads only draws that eager noise makes too, so the release is the same function of the
data and the PRF key (bit-identical under a seed; the same distribution unseeded). Only where
counters do not depend on which keys a round noises: integer keys and key ids. Digest counters rank
collisions among the keys present (noise_stage.py), so seeded non-integer keys stay eager.

Lazy rounds ≥ 2 also carry the open pairs (key not yet out of play: out keys never return) from round
to round in one stored table with each key's level, so a round joins the state once with the pairs
still open, where it joined every pair twice (for the candidates and for R_u), and R_u's pairs not
noised before the round come from the candidates alone (a heavy user's millions of open pairs are
not joined again); the last round carries nothing on, so it reads the round before's open pairs.
Round 2's open pairs hold of each heavy user (more pairs than `heavy_bound`, looked for only when a 1/32 sample
of the pairs shows a user with 8× that many: `may_be_heavy`) only the pairs in some later
round's prefix of its truncation order (every round's salt is drawn up front), read in one pass
(`reduced_pairs`): a user with millions of keys costs rounds ≥ 2 about a thousand rows; a check per round
and a fallback that restores the user's pairs keep R'_u's claim below (`remaining`).
The truncation keeps the same pairs as before, so releases are unchanged (tests/test_lazy_noise.py:
lazy = eager bit for bit; tests/test_pinned_releases.py); the time saved is in benchmarks/RESULTS.md,
"adaptive SIPS speed (stop 28)".
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from scipy.special import ndtr

from ...counters import collisions_possible, counter_sql
from ...prf import noise
from ...stages import Query
from ...stages.base import Rule
from ...stages.duckdb import DuckDBStages, merge
from ..base import Params, RoundPlan
from ..candidates import candidate_limit as limit_for
from . import state_rule


@dataclass
class LazyRounds:
    """The noise draws of the rounds run so far (tag, σ, kind, state rule), to draw them late."""

    params: Params
    salts: list[int]                          # every round's truncation salt, drawn up front (`run`)
    rounds: list[tuple[int, float, str, Rule]] = field(default_factory=list)
    open: tuple[Query, Query] | None = None   # the round before's open pairs and candidates (`remaining`)
    heavy: Query | None = None                # the heavy users and their prefix bounds (`reduced_pairs`); None:
                                              # no user is cut, and rounds ≥ 2 run the statements they run without


def lazy_rounds(engine: DuckDBStages, params: Params, salts: list[int]) -> LazyRounds | None:
    """A `LazyRounds` where a key's counter is the same whichever keys a round noises (integer keys,
    key ids; not digest counters, whose collision ranks depend on the keys present), else None. The
    candidates' per-user window runs in the truncation's user-hash passes (DuckDBStages.store_by_user_part).
    `salts`: every round's truncation salt (round 2 keeps the prefixes of later rounds' orders)."""
    if collisions_possible(engine.ctx.key_types):
        return None
    return LazyRounds(params, salts)


def candidate_limit(delta0: int, a_drop: float, rounds: int) -> int:
    """About how many open pairs per user `remaining` takes first: about twice what Δ0 keys in play need when
    no key was noised yet (after r rounds a pure-noise key is in play with probability P(z ≥ a_drop)^r),
    plus SLACK (mechanisms/candidates.py: any limit ≥ 1 gives the same R̃_u)."""
    return limit_for(delta0, float(ndtr(-a_drop)) ** rounds)


def remaining(engine: DuckDBStages, pairs: Query, state: Query | None, salt: int,
              lazy: LazyRounds | None = None) -> Query:
    """Step 1, R_u with `_dp_level`: every stored pair at level 1 in round 1 [adaptive_sips_first.sql],
    else the pairs whose key is in play in `state` [adaptive_sips_remaining.sql]. With `lazy` (module
    docstring) the same over a state first completed where the truncation that follows needs it: the
    open pairs (key not out of play) are stored with their levels, one join a round, and replace the pairs
    for later rounds [adaptive_sips_open.sql]; each user's first of them whose key no round noised yet,
    in that truncation's order (its `salt`; all n of them when n ≤ m, else about m, a prefix of the
    order under a threshold) [adaptive_sips_unnoised_pairs.sql, _candidates.sql, _unnoised.sql,
    _unsettled.sql], get their keys' earlier noise now (`noise_late`); a user cut with fewer than Δ0 of
    those in play before the cut gets all of them (a second pass). The result, the open
    pairs noised before and the candidates, in play [adaptive_sips_remaining_open.sql], is R'_u ⊆ R_u: it
    holds every pair of R_u ordered before u's cut, Δ0 of them when a cut was made (else R'_u = R_u), so
    the truncation keeps the same Δ0 first pairs of R_u (ties included) with the same d.

    Heavy users (`reduced_pairs`): round 2's open pairs hold of a heavy user u only Q_u = ∪_{j≥2} Q_uj,
    Q_uj = {p ∈ S_u : h_j(p) < b_uj} (h_j: round j's truncation order, its salt drawn up front; b_uj: u's
    stored bound for j). Claim, round j ≥ 2, u still heavy, κ = b_uj, or min(b_uj, last candidate's order)
    when u's candidates were cut: R'_u ⊇ {p ∈ R_u : h_j(p) < κ}; so when at least Δ0 pairs of R'_u lie
    strictly before κ (checked, [adaptive_sips_unsettled.sql]), R'_u ⊆ R_u holds every pair of R_u before
    the cut and Δ0 of them, and the truncation is the same as above. Proof: let p ∈ R_u with
    h_j(p) < κ ≤ b_uj. Then p ∈ Q_uj ⊆ Q_u, and p's key was in play at every round so far (p ∈ R_u, and
    keys out of play never return), so p is among the open pairs (round 2 kept Q_u's open pairs, later
    rounds carry every open pair on). If a round before j noised p's key, p is an open pair with its level
    and in R'_u (level > 0 as p ∈ R_u). Else p is one of u's pairs not noised yet, with h_j(p) < κ ≤ the
    last candidate's order when cut, so a candidate (candidates are a prefix of that order), noised late
    and in R'_u. Otherwise (fewer than Δ0 before κ) u is unsettled: [adaptive_sips_unreduce.sql]
    adds every stored pair of u that the open pairs lack, as not noised before (NULL level: keys noised or
    out already have a state row, which the second pass's late noise skips and R'_u's join reads), u stops
    being heavy, and the second pass makes all of u's pairs not noised yet candidates: R'_u = R_u. Each
    round's bounds and orders are fixed functions of u's own pairs and the salts, so R̃_u still depends on
    S_u, the state and u's coins alone (privacy argument 1 in the package docstring). Whether the heavy path
    runs at all (`may_be_heavy`: a sample of every user's pairs) changes nothing of this: a user not heavy has
    R'_u as argued first, a heavy one as just argued, so R̃_u is the truncation of R_u either way; the gate
    sets only which statements run."""
    if state is None:
        return engine.query("adaptive_sips_first", {"pairs": engine.table_name(pairs)})
    ctx = engine.ctx
    table = engine.table_name(state)
    if lazy is None:
        return engine.query("adaptive_sips_remaining", {"pairs": engine.table_name(pairs), "state": table,
                                                        "match": ctx.key_match("p", "s"), "exclude": ""})
    delta0 = lazy.params.delta0
    limit = candidate_limit(delta0, lazy.params["a_drop"], len(lazy.rounds))
    before = lazy.open
    if before is not None and len(lazy.rounds) == lazy.params["iterations"] - 1:
        # the last round carries nothing on: its candidates and R'_u read the round before's open pairs,
        # with the state joined where they are read (no table of open pairs to write)
        prior, stale = engine.table_name(before[0]), engine.table_name(before[1])   # open pairs, candidates
        source = (f"(SELECT p.* FROM {prior} AS p ANTI JOIN {table} AS s ON {ctx.key_match('p', 's')} "
                  "WHERE p._dp_level IS NULL) AS o")
        opened = None
    else:
        # round 2 reads the stored pairs, heavy users' cut to later rounds' prefixes (`reduced_pairs`, none when
        # no user is heavy: the stored pairs by name, as without heavy users)
        read = reduced_pairs(engine, pairs, table, lazy) if before is None else before[0]
        opened = engine.store(engine.query("adaptive_sips_open", {
            "pairs": engine.table_name(read) if engine.stored(read) else f"({read.sql})",
            "state": table,
            "match": ctx.key_match("p", "s"), "exclude": "" if before is None else " EXCLUDE (_dp_level)"},
            read.params), "open")
        if before is not None:        # the round before's open pairs and candidates, in one statement
            ctx.drop(*(engine.table_name(frame) for frame in before))
        source = engine.table_name(opened)
    truncation = engine.truncation_order(salt)     # the order of the truncation that follows (round_vectors)
    idents = {"open": source, "order": truncation.sql, "users": ""}
    order = truncation.params

    def candidates_of(users: str, part: dict) -> Query:   # one user-hash part's candidates
        unnoised = engine.query("adaptive_sips_unnoised_pairs", idents | {"users": users}, order | part)
        return engine.query("adaptive_sips_candidates", {"unnoised": unnoised.sql},
                            unnoised.params | {"candidates": limit})
    candidates = engine.store_by_user_part(candidates_of, "candidates")
    if opened is not None:
        lazy.open = (opened, candidates)
    name = engine.table_name(candidates)
    noise_late(engine, name, table, lazy)

    def kept(of: Callable[[str], str]) -> Query:       # R'_u, over the tables `of` maps (the heavy users' rows)
        if opened is None:            # the last round: the round before's open pairs in play now
            return engine.query("adaptive_sips_remaining", {"pairs": of(prior), "exclude": " EXCLUDE (_dp_level)",
                                                            "state": table, "match": ctx.key_match("p", "s")})
        return engine.query("adaptive_sips_remaining_open", {"open": of(source), "candidates": of(name),
                                                             "state": table, "match": ctx.key_match("c", "s")})
    result = kept(lambda t: t)
    heavy = None if lazy.heavy is None else engine.table_name(lazy.heavy)
    if heavy is None:                 # no heavy user: the check as without them
        unsettled = engine.query("adaptive_sips_unsettled", {"candidates": name, "state": table,
                                                             "match": ctx.key_match("c", "s")},
                                 {"max_contributions": delta0})
    else:
        unsettled = engine.query("adaptive_sips_unsettled_heavy", {
            "candidates": name, "state": table, "match": ctx.key_match("c", "s"), "heavy": heavy,
            "bound": f"_dp_b{len(lazy.rounds) - 1}", "order": truncation.sql,
            "kept": kept(lambda t: f"(SELECT * FROM {t} SEMI JOIN {heavy} USING (_dp_user))").sql},
            {"max_contributions": delta0} | order)
    (count,), = ctx.con.execute(f"SELECT count(*) FROM ({unsettled.sql})", unsettled.params).fetchall()
    if count:            # rare: their R̃_u may lie past the cut: all of theirs (stored before `name` grows)
        stored = engine.store(unsettled, "unsettled")
        if heavy is not None:         # heavy users among them get back the pairs their prefixes left out
            ctx.execute("adaptive_sips_unreduce", {"open": prior if opened is None else engine.table_name(opened),
                                                   "pairs": engine.table_name(pairs), "heavy": heavy,
                                                   "unsettled": engine.table_name(stored),
                                                   "match": ctx.key_match("p", "o")}, {})
        every = engine.query("adaptive_sips_unnoised_pairs", idents | {
            "users": f" WHERE _dp_user IN (SELECT _dp_user FROM {engine.table_name(stored)})"}, order)
        ctx.con.execute(f"INSERT INTO {name} BY NAME SELECT e.* FROM ({every.sql}) AS e ANTI JOIN {name} AS c "
                        f"ON e._dp_user = c._dp_user AND {ctx.key_match('e', 'c')}", every.params)
        noise_late(engine, name, table, lazy)
        engine.drop(stored)
    if opened is None:
        # this round's candidates were read only by noise_late and the check above (their keys are in `state`
        # now), the round before's by nothing: both go in one statement (R'_u reads the round before's open pairs)
        ctx.drop(stale, name, *([] if heavy is None else [heavy]))
    return result


def prefix_sizes(delta0: int, a_drop: float, rounds: int) -> list[int]:
    """About how many of a heavy user's pairs round 2 keeps for each round j = 2..I: j's candidate limit
    (`candidate_limit` with j − 1 rounds before), which holds about 2Δ0 pairs in play. Any sizes give the
    same release (the check and fallback in `remaining`); they set only how often the fallback runs."""
    return [candidate_limit(delta0, a_drop, j) for j in range(1, rounds)]


def heavy_bound(delta0: int, a_drop: float, rounds: int) -> int:
    """Users with more open pairs than 64 Σ_j p_j (`prefix_sizes`; ≈ 54k at Δ0 = 100) are cut to their
    prefixes, at most about a 64th of their pairs: the cut's join over every pair costs ordinary data more
    than it saves (measured, benchmarks/RESULTS.md stop 30), so only a really heavy user turns it on (any
    bound gives the same release; it only sets which users' pairs are cut). Counted only past `may_be_heavy`'s
    gate (stop 31: data with no such user runs no statement of the heavy path but the gate's sample)."""
    return 64 * sum(limit_for(delta0, float(ndtr(-a_drop)) ** j) for j in range(1, rounds))


def reduced_pairs(engine: DuckDBStages, pairs: Query, state: str, lazy: LazyRounds) -> Query:
    """The pairs rounds ≥ 2 read, for round 2's open pairs [adaptive_sips_prefixes.sql]: every pair of a user
    with at most about 64 Σ_j p_j open pairs after round 1 (`state`; p_j: `prefix_sizes`; estimated from a
    sixteenth of the pairs), and of a heavier user, stored with their bounds
    in `lazy.heavy` [adaptive_sips_heavy.sql, adaptive_sips_prefix_bound.sql], the union over rounds j ≥ 2 of
    its pairs whose order under j's truncation salt (drawn up front) lies below j's bound b_j, about p_j of
    them: Q_j. One pass over the pairs, so a user with millions of keys costs rounds ≥ 2 about Σ_j p_j rows.
    `remaining` shows R'_u still holds every pair of R_u before u's cut (the cut ≤ b_j for a heavy user).
    Only where `may_be_heavy` finds a user with over 8× the bound's pairs (by a sample) are open pairs counted;
    else, and where no user turns out heavy, `lazy.heavy` stays None and every round runs the statements it
    runs without heavy users (the stored pairs by name, adaptive_sips_unsettled.sql)."""
    settings = (lazy.params.delta0, lazy.params["a_drop"], lazy.params["iterations"])
    name, cut = engine.table_name(pairs), heavy_bound(*settings)
    if not may_be_heavy(engine, name, cut):
        return pairs                  # no user cut: round 2 reads the stored pairs by name, as without heavy users
    sizes = prefix_sizes(*settings)
    bounds: list[str] = []
    prefixes: list[str] = []
    bound_params: dict = {}
    order_params: dict = {}
    for i, (size, salt) in enumerate(zip(sizes, lazy.salts[1:], strict=True)):
        bound = _numbered(engine.query("adaptive_sips_prefix_bound", {}, {"prefix": size}), i)
        order = _numbered(engine.truncation_order(salt), i)
        bounds.append(f", {bound.sql} AS _dp_b{i}")
        prefixes.append(f"({order.sql})::DOUBLE < h._dp_b{i}")
        bound_params |= bound.params
        order_params |= order.params
    lazy.heavy = engine.store(engine.query("adaptive_sips_heavy", {"pairs": name, "bounds": "".join(bounds),
                                                                   "keys": engine.ctx.key_aliases, "state": state,
                                                                   "match": engine.ctx.key_match("p", "s")},
                                           bound_params | {"heavy": cut}), "heavy")
    if not engine.ctx.scalar(f"SELECT count(*) FROM {engine.table_name(lazy.heavy)}"):
        engine.drop(lazy.heavy)       # nobody to cut: the stored pairs as they are, no join, checks as without
        lazy.heavy = None
        return pairs
    return engine.query("adaptive_sips_prefixes", {"pairs": name, "heavy": engine.table_name(lazy.heavy),
                                                    "prefixes": " OR ".join(prefixes)}, order_params)


GATE_FACTOR = 8      # `may_be_heavy` looks for users with more than GATE_FACTOR × heavy_bound pairs (by a sample)


def may_be_heavy(engine: DuckDBStages, pairs: str, bound: int) -> bool:
    """Whether round 2 looks for heavy users at all [adaptive_sips_heavy_gate.sql]: some user's pairs in a 1/32
    system sample of the stored pairs (whole vectors: it reads about a 32nd of them, a few ms at 10M pairs,
    where counting open pairs, adaptive_sips_heavy.sql, reads and hashes every pair), times 32, exceed
    GATE_FACTOR × `bound`. Where pairs are stored user by user a sampled vector can hold 2048 pairs of one
    ordinary user: the factor asks for more than GATE_FACTOR × bound / 32 sampled pairs (≈ 13.6k at Δ0 = 100),
    so only a user with at least that many pairs can turn it on, and one with millions spans thousands of
    vectors and does (unless the sample misses nearly all of them). A heavy user it misses keeps all its
    pairs (the path without heavy users), so the answer sets only which statements run and their cost, never
    the release (`remaining`)."""
    (count,), = engine.ctx.fetch("adaptive_sips_heavy_gate", {"pairs": pairs}, {"gate": GATE_FACTOR * bound})
    return bool(count)


def _numbered(query: Query, i: int) -> Query:
    """`query` with each bound value renamed `$name_i`, so one statement can hold it once per round."""
    sql = query.sql
    for name in sorted(query.params, key=len, reverse=True):
        sql = sql.replace(f"${name}", f"${name}_{i}")
    return Query(sql, {f"{name}_{i}": value for name, value in query.params.items()})


def noise_late(engine: DuckDBStages, candidates: str, state: str, lazy: LazyRounds) -> None:
    """The candidate keys no round has noised yet [adaptive_sips_unnoised.sql] get each earlier round's
    noise, drawn now on their counters with that round's tag, through that round's rule with no weight
    (NaN: no user kept them), until a round drops them; their state rows (level after the last round,
    0 once dropped) are added to `state`. The rule reads the noisy weight as the eager path's noise
    stage forms it (noise_stage.scan_noisy: 0 + σ·z), so the levels are the same numbers."""
    ctx = engine.ctx
    hi, lo, _ = counter_sql(ctx.key_types)
    keys = ctx.arrow("adaptive_sips_unnoised", {"candidates": candidates, "state": state,
                                                "match": ctx.key_match("c", "s"), "keys": ctx.key_aliases,
                                                "counter_hi": hi, "counter_lo": lo}, {})
    if not keys.num_rows:
        return
    nkeys = ctx.key_count
    hi_col = keys.column(nkeys).to_numpy()
    lo_col = keys.column(nkeys + 1).to_numpy()
    weights = np.full(keys.num_rows, np.nan)
    level = np.ones(keys.num_rows)
    for tag, scale, kind, rule in lazy.rounds:
        z = noise(kind, ctx.randomness.key, tag, hi_col, lo_col, None)
        noisy = np.where(np.isnan(weights), 0.0, weights) + scale * z
        _, columns = rule(weights, noisy)
        level = np.where(level > 0, columns["_dp_level"], 0.0)
    rows = pa.table([keys.column(i) for i in range(nkeys)] + [pa.array(level, pa.float64())],
                    names=[f"_dp_k{i}" for i in range(nkeys)] + ["_dp_level"])
    view = ctx.register("noised_late", rows)
    ctx.con.execute(f"INSERT INTO {state} BY NAME SELECT * FROM {view}")


def vectors(engine: DuckDBStages, kept: Query, cap: float, uniform: bool = False) -> Query:
    """Step 3, (`_dp_user`, keys, `_dp_x`): each user's capped unit-norm vector over R̃_u
    [adaptive_sips_vectors.sql]; `uniform` (round 1: every level 1, c = 1) the same numbers, 1/√d, without
    counting levels [adaptive_sips_vectors_uniform.sql]."""
    if uniform:
        return engine.query("adaptive_sips_vectors_uniform", {"kept": kept.sql, "keys": engine.ctx.key_aliases},
                            kept.params)
    return engine.query("adaptive_sips_vectors", {"kept": kept.sql, "keys": engine.ctx.key_aliases},
                        merge(kept.params, {"cap": cap}))


def weights(engine: DuckDBStages, vectors: Query) -> Query:
    """Step 4, (keys, `_dp_w` = Σ_u x_ui) over ∪R̃_u [adaptive_sips_weights.sql]."""
    return engine.query("adaptive_sips_weights", {"vectors": vectors.sql, "keys": engine.ctx.key_aliases},
                        vectors.params)


def state(engine: DuckDBStages, remaining: Query, vectors: Query, state: Query | None, plan: RoundPlan, params: Params,
          index: int, lazy: LazyRounds | None = None) -> tuple[Query, int]:
    """Noise on EVERY key of ∪R_u [adaptive_sips_universe.sql over adaptive_sips_in_play_first.sql in round 1,
    else adaptive_sips_in_play.sql: the state's keys in play], `next_state` by the engine's `decide_into`
    (the generic `decide`, its rows inserted straight into the state) → the stored next state (keys,
    `_dp_level`, `_dp_round`; released keys kept)
    [adaptive_sips_state.sql, adaptive_sips_decided.sql, adaptive_sips_carry.sql] and this round's
    number of released keys. With `lazy` (module docstring) the noise is drawn on ∪R̃_u in round 1 and
    on the state's keys in play after, every key noised keeps its row (adaptive_sips_carry_out.sql),
    and the round's draw is recorded in `lazy` for keys noised later."""
    ctx = engine.ctx
    keys = ctx.key_aliases
    weighted = weights(engine, vectors)
    if state is None and lazy is not None:      # lazy round 1: the keys with a weight
        universe = weighted
    else:
        in_play = (engine.query("adaptive_sips_in_play_first", {"remaining": remaining.sql, "keys": keys},
                                remaining.params) if state is None else
                   engine.query("adaptive_sips_in_play", {"state": engine.table_name(state), "keys": keys}))
        universe = engine.query("adaptive_sips_universe", {"in_play": in_play.sql, "weighted": weighted.sql,
                                                           "keys": keys}, merge(in_play.params, weighted.params))
    rule = state_rule(plan, params, keep_out=lazy is not None)
    tag = None
    if lazy is not None:              # this round's tag, as the noise stage would draw it, kept for late draws
        tag = ctx.randomness.next_round()
        lazy.rounds.append((tag, plan.scale, plan.noise, rule))
    released: list[int] = []          # per batch (batches are decided on a thread pool: append is atomic)

    def counted(w: np.ndarray, noisy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """`rule`, counting the round's released keys as the batches are decided (no query afterwards)."""
        mask, columns = rule(w, noisy)
        released.append(int(np.count_nonzero(np.asarray(columns["_dp_released"])[mask])))
        return mask, columns

    target = ctx.temp_table("state")
    if state is None:                 # round 1: created empty, typed like the input's keys
        ctx.execute("adaptive_sips_state", {"target": target, "universe": universe.sql, "keys": keys},
                    universe.params)
    else:                             # from the keys earlier rounds released (lazy: every key out), which stay
        ctx.execute("adaptive_sips_carry" if lazy is None else "adaptive_sips_carry_out",
                    {"target": target, "state": engine.table_name(state), "keys": keys}, {})
    engine.decide_into(universe, plan, counted, lambda decided: ctx.execute(    # the decisions go into the state
        "adaptive_sips_decided", {"target": target, "decided": decided, "keys": keys}, {"round": index}), tag)
    return engine.table(target), sum(released)


def released(engine: DuckDBStages, state: Query) -> Query:
    """The keys a state records as released [adaptive_sips_released.sql]."""
    return engine.query("adaptive_sips_released", {"state": engine.table_name(state), "keys": engine.ctx.key_aliases})
