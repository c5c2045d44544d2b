"""MAD and MAD2R's own stages on DuckDB (templates in ./sql; spec docs/specs/mad-mad2r.md).

Lazy round-1 noise (MAD2R where `mad2r_lazy` says it pays; `mad2r_screen` hands a `LazyScreen` to
`noise_late`): ŵ1 of a key is the PRF value at (round 1's tag, the key's counter) plus its weight, the
same whenever it is drawn. A key outside ∪S̃_u
(every holder, each over Δ0, truncated it away) has weight 0, and its screen (removed for round 2,
biased) is read only by round 2's truncation of its holders and by their vectors when kept (the bias
flag reads the kept pairs only, spec §4). So round 1 noises ∪S̃_u, and such a key gets its round-1
noise only when round 2's truncation may keep it (`noise_late`): each user's first m pairs not noised
in that truncation's order (its salt, which the mechanism draws first and hands to both), all of them
for a user cut at m with fewer than Δ0 of those kept for round 2 before the cut. Every pair of R_u
before a user's cut then has its screen, Δ0 of them are in R_u when a cut was made, and a pair after
the cut that was never noised (treated as unbiased in round 2: no status row) is never kept, so the
truncation keeps the same pairs of R_u with the same d. Every draw is one the eager rule (noise on
every key of the universe, mad2r_universe.sql) makes, on the same counter with the same round's
sub-key, and every decision reads only such draws: the release is the same function of the data and
the PRF key (bit-identical under a seed; the same distribution unseeded). Only where counters do not
depend on which keys a round noises (integer keys and key ids, not digest counters), as adaptive SIPS's
lazy noise; the candidates' per-user top-m runs in the truncation's user-hash passes. A user with more
than H stored pairs (`heavy_limits`; looked for only when the largest user is over H, read in the cost
rule's scan) has its candidates ranked over a prefix of round 2's order holding about 16 m of its pairs,
with a check and a fallback to all of its pairs (`noise_late`): the candidates, and so the release, are
the same. Round 2 then reads
a settled cut user's pairs up to its last candidate only (`pruned`; spec §6, "Pruned round-2 input"):
the truncation keeps none after it, so every user's kept pairs, d and weights are the same.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scipy.special import ndtr

from ...counters import collisions_possible
from ...stages import Query
from ...stages.base import Rule
from ...stages.duckdb import DuckDBStages, merge
from ..base import RoundPlan
from ..candidates import candidate_limit as limit_for
from . import screen_exceptions

# Lazy round 1 pays from about this share of the stored pairs beyond each user's first m candidates on (crossover
# measured at 2M and 10M rows, 2 threads: benchmarks/RESULTS.md, "MAD2R lazy cost rule (stop 28)").
LAZY_SHARE = 0.4


@dataclass(frozen=True)
class LazyScreen:
    """Round 1's noise draw as `mad2r_screen` drew it lazily (its tag, plan and screen rule), for
    `noise_late` to draw the rest of it, and the largest user's stored pairs (`mad2r_lazy`: the heavy gate)."""

    tag: int
    plan: RoundPlan
    rule: Rule
    largest: int = 0


def mad2r_lazy(engine: DuckDBStages, pairs: Query, max_contributions: int, plan1: RoundPlan,
               plan2: RoundPlan) -> int:
    """Whether `mad2r_screen` draws round 1 lazily: where it pays (else the eager screen). Lazy needs counters
    that are the same whichever keys a round noises (integer keys, key ids; not digest counters, whose collision
    ranks depend on the keys present). It costs an anti-join of the stored pairs with round 1's vectors and a
    per-user top-m (`noise_late`, m = `candidate_limit`; the window runs in the truncation's user-hash passes:
    DuckDBStages.store_by_user_part) and saves the noise on the keys only users over Δ0 hold and round 2's
    work on each cut user's pairs past its candidates (`pruned`); so lazy only where the stored pairs beyond
    each user's first m, Σ_u (n_u − m)⁺ (one scan of the pairs' sizes [mad2r_beyond.sql]), are at least
    LAZY_SHARE of the pairs: one heavy user, not ordinary data where many users hold a few hundred keys.

    The choice reads the data (the pairs' sizes, not public), as the truncation's pass count does, but both
    paths release the same bits (module docstring: every decision reads only draws the eager rule makes,
    under the same tags and counters), so only time follows it, never what is released.

    Returns 0 (eager), else the largest user's stored pair count n_u (≥ 1), read in the same scan: the gate of
    `noise_late`'s heavy-user prefixes (`heavy_limits`), which likewise sets only which statements run."""
    if collisions_possible(engine.ctx.key_types):
        return 0
    limit = candidate_limit(max_contributions, plan1, plan2)
    (total, beyond, largest), = engine.ctx.fetch("mad2r_beyond", {"pairs": engine.table_name(pairs)},
                                                 {"candidates": limit})
    return int(largest) if total and beyond >= LAZY_SHARE * total else 0


# A heavy user's candidates are ranked over a prefix of its order holding about PREFIX_FACTOR × m of its pairs,
# for users with more than HEAVY_FACTOR × that many pairs (`heavy_limits`).
PREFIX_FACTOR = 16
HEAVY_FACTOR = 16


def heavy_limits(limit: int) -> tuple[int, int]:
    """(P, H) for candidate limit m: a user with more than H = HEAVY_FACTOR · P stored pairs has its candidates
    ranked over the prefix of round 2's order that about P = PREFIX_FACTOR · m of its pairs lie in
    [mad2r_prefix.sql] (`noise_late`). P is 16 m so that m of the prefix's pairs are not noised yet unless
    more than 15/16 of the user's keys were noised in round 1 (held by users who kept them: then the fallback
    ranks all of its pairs, as before); H keeps the prefix to users whose pairs it cuts at least 16-fold
    (below, the anti-join and ranking of their pairs cost little). Any (P, H) give the same release
    (`noise_late`); they set only which statements run and how often the fallback does."""
    prefix = PREFIX_FACTOR * limit
    return prefix, HEAVY_FACTOR * prefix


def candidate_limit(max_contributions: int, plan1: RoundPlan, plan2: RoundPlan) -> int:
    """How many pairs not noised yet `noise_late` screens first per user: about twice what Δ0 pairs of
    R_u need (a key of weight 0 stays for round 2 when σ1·z + c_U·σ1 ≥ T2, probability
    Φ((c_U·σ1 − T2)/σ1)), plus SLACK (mechanisms/candidates.py: any limit ≥ 1 gives the same R̃_u)."""
    return limit_for(max_contributions, float(ndtr((plan2.extra.upper - plan2.threshold) / plan1.scale)))


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
                 max_contributions: int, lazy: int = 0) -> tuple[Query, LazyScreen | None]:
    """Round-1 noisy weights ŵ1 on the whole universe (support ∪ keys of users over Δ0)
    [mad2r_universe.sql], MAD2R's decisions by the engine's `decide_into` with `screen_round1`, and
    only the exceptions (released, removed or biased keys) stored [mad2r_status.sql]: the status table.
    With `lazy` (`mad2r_lazy`'s answer, nonzero: module docstring) ŵ1 on the support ∪S̃_u only, and the
    `LazyScreen` (round 1's tag, plan and rule, the largest user's pairs) for `noise_late`; else None."""
    ctx = engine.ctx
    keys = ctx.key_aliases
    weighted = mad_weights(engine, vectors, plan1)
    universe = weighted if lazy else engine.query(
        "mad2r_universe", {"weighted": weighted.sql, "pairs": engine.table_name(pairs), "keys": keys},
        merge(weighted.params, {"max_contributions": max_contributions}))
    rule = screen_exceptions(plan1, plan2)
    # round 1's tag, as the noise stage would draw it, kept for late draws
    late = LazyScreen(ctx.randomness.next_round(), plan1, rule, int(lazy)) if lazy else None
    target = ctx.temp_table("status")
    ctx.execute("mad2r_status", {"target": target, "universe": universe.sql, "keys": keys}, universe.params)
    engine.decide_into(universe, plan1, rule, lambda exceptions: add_exceptions(engine, target, exceptions),
                       None if late is None else late.tag)
    return engine.table(target), late


def add_exceptions(engine: DuckDBStages, status: str, exceptions: str) -> None:
    """Insert decided exceptions (the view `DuckDBStages.decide_into` hands over, read once) into the status
    table, by column name (the insert casts keys back to the input's types) [stage_append_by_name.sql]."""
    engine.ctx.execute("stage_append_by_name",
                       {"target": f"temp.main.{status}", "query": f"SELECT * FROM {exceptions}"}, {})


def noise_late(engine: DuckDBStages, pairs: Query, support: Query, status: Query, lazy: LazyScreen,
               plan2: RoundPlan, max_contributions: int, salt: int) -> Query:
    """Lazy round 1 (module docstring): each user's first m pairs whose key round 1 did not noise, in the
    order of round 2's truncation under `salt` [mad2r_candidates.sql], get their keys' round-1 noise now
    through the screen rule with no weight [mad2r_late_keys.sql → `decide_into` under round 1's tag], their
    exceptions added to `status`; a user cut at m with fewer than Δ0 of those kept for round 2 before the
    cut [mad2r_unsettled.sql] gets all of its keys screened (a second pass). `support`: the round-1 user
    vectors (∪S̃_u, the keys round 1 noised).

    Heavy users (only when the largest user, `lazy.largest`, has more than H pairs: `heavy_limits`; else the
    statements above and nothing more). The candidates of a user u with n_u > H stored pairs are ranked over
    Q_u = {p ∈ S_u : double(π(p)) < b_u} [mad2r_prefix.sql] instead of S_u, b_u = P/n_u · 2⁶⁴ (π: round 2's
    truncation order under `salt`, a keyed hash on [0, 2⁶⁴); about P of u's pairs lie in Q_u), so the anti-join
    with the support and the per-user ranking read about P of its pairs, not n_u. Claim: the candidate table is
    one that mad2r_candidates.sql over all pairs can produce, so everything after it (the late keys, the
    second pass, the cuts, `pruned`) and the release are unchanged, bit for bit under a seed. Proof: for u with
    n_u ≤ H, Q_u = S_u. Else, double() is non-decreasing, so double(π(p)) < b_u ≤ double(π(q)) gives π(p) < π(q):
    Q_u is closed downward in π (pairs tied on π are both in Q_u or both out), and so is its set U'_u of pairs
    not noised, within u's pairs not noised U_u: every pair of U_u − U'_u follows every pair of U'_u in π.
    (i) |U'_u| ≥ m: the first m of U'_u in π are the first m of U_u (which of pairs tied at the m-th is taken is
    left open in both, and mad2r_candidates.sql shows it does not matter). (ii) |U'_u| < m, U'_u possibly
    empty (u then has no candidate row at all): u is found by the check [mad2r_short.sql: the users over H
    with fewer than m candidates], its candidates are deleted and ranked again over S_u
    [mad2r_unprefix.sql, mad2r_candidates.sql over those users]. Which users are over H (the gate reads the
    pairs' sizes, not public) and P set only which statements run and how often (ii) does, never the
    candidates (tests/test_lazy_noise.py: lazy = eager with the prefixes on, and with P tiny so that (ii) runs
    for every heavy user; skipping (ii) is caught)."""
    plan1, rule, tag = lazy.plan, lazy.rule, lazy.tag
    ctx = engine.ctx
    limit = candidate_limit(max_contributions, plan1, plan2)
    pairs_name, support_name, status_name = engine.table_name(pairs), engine.table_name(support), \
        engine.table_name(status)
    order = engine.truncation_order(salt)

    def ranked(source: str, bound: dict) -> Callable[[str, dict], Query]:   # mad2r_candidates.sql over `source`
        return lambda users, part: engine.query(
            "mad2r_candidates", {"pairs": source, "support": support_name, "match": ctx.key_match("p", "s"),
                                 "order": order.sql, "users": users},
            order.params | {"candidates": limit} | bound | part)
    prefix, heavy = heavy_limits(limit)
    short = None
    if lazy.largest > heavy:          # some user over H: heavy users' candidates over their prefixes
        bound = {"heavy": heavy, "prefix": prefix}
        reduced = engine.query("mad2r_prefix", {"pairs": pairs_name, "order": order.sql}, order.params | bound)
        candidates = engine.store_by_user_part(ranked(reduced.sql, bound), "candidates")
        name = engine.table_name(candidates)
        check = engine.query("mad2r_short", {"pairs": pairs_name, "candidates": name},
                             {"heavy": heavy, "candidates": limit})
        short = ctx.temp_table("short")
        (count,), = ctx.fetch("stage_store", {"target": short, "query": check.sql}, check.params)  # rows made
        if count:                     # (ii): their prefixes may have cut the ranking short: over all their pairs
            restore(engine, name, short, ranked(pairs_name, {}))
    else:
        candidates = engine.store_by_user_part(ranked(pairs_name, {}), "candidates")
        name = engine.table_name(candidates)
    late = {"support": support_name, "match": ctx.key_match("p", "s"), "keys": ctx.key_aliases}

    def screen(keys: Query) -> None:
        engine.decide_into(keys, plan1, rule, lambda exceptions: add_exceptions(engine, status_name, exceptions), tag)

    screen(engine.query("mad2r_late_keys", late | {"pairs": name, "screened": "", "users": ""}))
    unsettled = engine.query("mad2r_unsettled", {"candidates": name, "status": status_name,
                                                 "match": ctx.key_match("c", "s")},
                             {"candidates": limit, "max_contributions": max_contributions})
    users = ctx.temp_table("unsettled")
    (count,), = ctx.fetch("stage_store", {"target": users, "query": unsettled.sql}, unsettled.params)  # rows made
    if count:                                           # their R̃_u may lie past the cut: all of their keys
        screen(engine.query("mad2r_late_keys", late | {
            "pairs": pairs_name, "screened": f" ANTI JOIN {name} AS c ON {ctx.key_match('p', 'c')}",
            "users": f" WHERE p._dp_user IN (SELECT _dp_user FROM {users})"}))
    cuts = engine.store(engine.query("mad2r_cuts", {"candidates": name, "unsettled": users}, {"candidates": limit}),
                        "cuts")
    ctx.drop(users, *([] if short is None else [short]))
    engine.drop(candidates)
    return cuts


def restore(engine: DuckDBStages, candidates: str, short: str, ranked: Callable[[str, dict], Query]) -> None:
    """`noise_late`'s fallback (ii): the candidates of the heavy users in `short` (mad2r_short.sql) deleted
    [mad2r_unprefix.sql] and ranked again over all of their pairs (`ranked`: mad2r_candidates.sql over the
    stored pairs, here over those users only)."""
    engine.ctx.execute("mad2r_unprefix", {"candidates": candidates, "short": short}, {})
    full = ranked(f" WHERE _dp_user IN (SELECT _dp_user FROM {short})", {})
    engine.ctx.execute("stage_append", {"target": candidates, "query": full.sql}, full.params)


def pruned(engine: DuckDBStages, pairs: Query, cuts: Query, salt: int) -> Query:
    """Round 2's input with lazy round 1 (spec §6, "Lazy round 1"): the stored pairs less each settled cut
    user's pairs ordered after its last candidate in round 2's truncation order under `salt`
    [mad2r_pruned.sql]; the truncation keeps the same pairs with the same d, reading a heavy user's
    pairs once instead of joining, sizing and ranking all of them."""
    order = engine.truncation_order(salt)
    return engine.query("mad2r_pruned", {"pairs": engine.table_name(pairs), "cuts": engine.table_name(cuts),
                                         "order": order.sql}, order.params)


def mad2r_vectors(engine: DuckDBStages, pairs: Query, status: Query, max_contributions: int, beta_min: float,
                  beta_max: float, salt: int, cuts: Query | None = None) -> Query:
    """Stored round-2 user vectors (`_dp_user`, keys, `_dp_d`, `_dp_v`, `_dp_uw`, `_dp_biased`)
    [mad2r_remaining.sql, mad2r_vectors.sql, then mad2r_kept_biases.sql (the kept pairs' biases, after the
    truncation) and mad2r_biased.sql written in place by mad2r_set_biased.sql; spec §6, §4], truncated under
    `salt` (the mechanism's round-2 salt, drawn before `noise_late`); with
    `cuts` (lazy round 1: `noise_late`) over the `pruned` pairs, the same vectors."""
    ctx = engine.ctx
    keys = ctx.key_aliases
    source = Query(engine.table_name(pairs), {}) if cuts is None else pruned(engine, pairs, cuts, salt)
    remaining = engine.query("mad2r_remaining", {"pairs": source.sql if cuts is None else f"({source.sql})",
                                                 "keys": keys, "status": engine.table_name(status),
                                                 "carried": ", p._dp_h" if ctx.pairs_carry_hash else ""},
                             source.params)
    kept = engine.truncate(engine.sized(remaining), max_contributions, salt)
    vectors = engine.store(engine.query("mad2r_vectors", {"kept": kept.sql, "keys": keys}, kept.params), "vectors2")
    target = engine.table_name(vectors)
    # in place, in this order: the kept pairs' biases, then the biased users' water-filling (it reads the former)
    for biased in (engine.query("mad2r_kept_biases", {"vectors": target, "keys": keys,
                                                      "status": engine.table_name(status)}, {"beta_min": beta_min}),
                   engine.query("mad2r_biased", {"vectors": target, "keys": keys}, {"beta_max": beta_max})):
        ctx.execute("mad2r_set_biased", {"target": target, "biased": biased.sql, "match": ctx.key_match("t", "s")},
                    biased.params)
    return vectors


def mad2r_released(engine: DuckDBStages, status: Query) -> Query:
    """The keys MAD2R round 1 released (O1) [mad2r_released.sql]."""
    return engine.query("mad2r_released", {"status": engine.table_name(status), "keys": engine.ctx.key_aliases})
