-- Adaptive SIPS rounds ≥ 2, step 1 (docs/specs/adaptive-sips.md): R_u = S_u \ (O ∪ Dropped), each pair
-- with its key's level. The state has a row for every key still in play (the previous round noised
-- every key of ∪_u R_u, sql/adaptive_sips_universe.sql), so an inner join keeps exactly those pairs.
-- With lazy noise a round that stores its open pairs reads those instead (adaptive_sips_remaining_open.sql);
-- the last round reads the round before's open pairs here ({pairs}; {exclude} leaves out their stale
-- level), every pair of them in play now: R'_u ⊇ the pairs of R_u before u's cut
-- (duckdp/mechanisms/adaptive_sips/duckdb.py, `remaining`).
-- idents: pairs, exclude, state, match
-- params:
SELECT p.*{exclude}, s._dp_level FROM {pairs} AS p JOIN {state} AS s ON {match} WHERE s._dp_level > 0
