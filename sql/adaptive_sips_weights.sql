-- Adaptive SIPS, last round's weights (specs/adaptive-sips.md step 4): w_i = Σ_u x_ui over R̃_u. No
-- later round reads its state, so only keys of ∪R̃_u (the ones it may release) need noise (sql/basic.sql).
-- idents: vectors, keys
-- params:
WITH vectors AS (    -- every pair of R_u with x_ui (sql/adaptive_sips_vectors.sql)
  {vectors}
)
SELECT {keys}, sum(_dp_x) AS _dp_w FROM vectors WHERE _dp_kept GROUP BY {keys}
