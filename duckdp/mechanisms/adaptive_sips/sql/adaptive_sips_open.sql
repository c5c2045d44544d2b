-- Adaptive SIPS rounds ≥ 2 with lazy noise (duckdp/mechanisms/adaptive_sips/duckdb.py, `remaining`): the
-- pairs still open, stored once a round, each with its key's level in the state (NULL: no round noised the
-- key yet; levels > 0: in play). Keys out of play (level 0: released or dropped) never return, so the next
-- round reads these rows instead of every pair ({pairs}: the stored pairs in round 2, the previous round's
-- open pairs after, their stale level left out by {exclude}). One join of the pairs with the state a
-- round: the round's candidates (adaptive_sips_unnoised_pairs.sql) and R_u (adaptive_sips_remaining.sql)
-- both read the result.
-- idents: pairs, exclude, state, match
-- params:
SELECT p.*{exclude}, s._dp_level FROM {pairs} AS p LEFT JOIN {state} AS s ON {match}
WHERE s._dp_level IS NULL OR s._dp_level > 0
