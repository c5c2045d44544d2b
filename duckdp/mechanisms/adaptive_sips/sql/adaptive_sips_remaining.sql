-- Adaptive SIPS rounds ≥ 2, step 1 (docs/specs/adaptive-sips.md): R_u = S_u \ (O ∪ Dropped), each pair
-- with its key's level. The state has a row for every key still in play (the previous round noised
-- every key of ∪_u R_u, sql/adaptive_sips_universe.sql), so an inner join keeps exactly those pairs.
-- With lazy noise the round reads its open pairs instead (adaptive_sips_remaining_open.sql).
-- idents: pairs, state, match
-- params:
SELECT p.*, s._dp_level FROM {pairs} AS p JOIN {state} AS s ON {match} WHERE s._dp_level > 0
