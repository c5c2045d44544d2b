-- Adaptive SIPS round 1, step 1 (docs/specs/adaptive-sips.md): nothing is released or dropped yet
-- and every level is 1, so R_u = S_u.
-- idents: pairs
-- params:
SELECT *, 1.0::DOUBLE AS _dp_level FROM {pairs}
