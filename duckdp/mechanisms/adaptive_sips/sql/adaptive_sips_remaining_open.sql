-- Adaptive SIPS rounds ≥ 2 with lazy noise, step 1 (docs/specs/adaptive-sips.md): R'_u, the open pairs
-- (adaptive_sips_open.sql) whose key is in play, each with its level: those noised before this round as
-- stored, the others (noised late this round, or never: a heavy user's pairs past the candidates) looked
-- up in the state, which holds a row for every key noised. R'_u holds every pair of R_u ordered before
-- the user's candidate cut, and Δ0 of them when a cut was made (duckdp/mechanisms/adaptive_sips/duckdb.py,
-- `remaining`), so the truncation keeps the same R̃_u with the same d as over R_u.
-- idents: open, state, match
-- params:
SELECT * FROM {open} WHERE _dp_level > 0
UNION ALL
SELECT o.* EXCLUDE (_dp_level), s._dp_level FROM {open} AS o JOIN {state} AS s ON {match}
WHERE o._dp_level IS NULL AND s._dp_level > 0
