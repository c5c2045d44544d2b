-- Adaptive SIPS step 4 (docs/specs/adaptive-sips.md): w_i = Σ_u x_ui over the kept sets R̃_u, one row
-- per key of ∪R̃_u. The last round noises only these (no later round reads its state).
-- idents: vectors, keys
-- params:
WITH vectors AS (    -- x_ui per kept pair (sql/adaptive_sips_vectors.sql)
  {vectors}
)
SELECT {keys}, sum(_dp_x) AS _dp_w FROM vectors GROUP BY {keys}
