-- Adaptive SIPS round 1, step 3 (docs/specs/adaptive-sips.md): every level is 1 and the cap is c = 1, so
-- user u's vector is uniform, x_ui = 1/√d over R̃_u (d = |R̃_u|, stage_truncate.sql). The general
-- template adaptive_sips_vectors.sql gives the same numbers bit for bit (1.0/√(n_hi + 0.0) with n_hi = d,
-- at the cap 1/√d), but groups and joins R̃_u by user to count levels; this one reads each kept pair once
-- and leaves the constant level out of the truncation.
-- idents: kept, keys
-- params:
WITH kept AS (       -- R̃_u with d (stage_truncate.sql)
  {kept}
)
SELECT _dp_user, {keys}, 1.0 / sqrt(_dp_d) AS _dp_x FROM kept
