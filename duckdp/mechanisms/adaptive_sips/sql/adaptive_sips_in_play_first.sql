-- Adaptive SIPS round 1: the keys of ∪_u R_u = ∪_u S_u (docs/specs/adaptive-sips.md, step 1), once
-- each: the distinct keys of R_u (adaptive_sips_first.sql; adaptive_sips_universe.sql reads this).
-- idents: remaining, keys
-- params:
SELECT DISTINCT {keys} FROM ({remaining})
