-- Adaptive SIPS rounds ≥ 2 with lazy noise, step 1 (docs/specs/adaptive-sips.md): R'_u, the open pairs
-- (adaptive_sips_open.sql) whose key is in play, each with its level: those noised before this round as
-- stored, and of the others the user's candidates (adaptive_sips_candidates.sql; their keys were noised
-- late this round) in play, looked up in the state. An open pair left out that a round noised late is
-- past its user's cut (another user's candidate). R'_u holds every pair of R_u ordered before the
-- user's cut, and Δ0 of them when a cut was made (duckdp/mechanisms/adaptive_sips/duckdb.py,
-- `remaining`), so the truncation keeps the same R̃_u with the same d as over R_u.
-- idents: open, candidates, state, match
-- params:
SELECT * FROM {open} WHERE _dp_level > 0
UNION ALL
SELECT c.* EXCLUDE (_dp_order, _dp_cut), s._dp_level FROM {candidates} AS c JOIN {state} AS s ON {match}
WHERE s._dp_level > 0
