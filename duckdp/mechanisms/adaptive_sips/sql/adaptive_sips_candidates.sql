-- Adaptive SIPS rounds ≥ 2 with lazy noise: each user's first $candidates pairs not noised yet
-- (adaptive_sips_unnoised_pairs.sql) in the order of this round's truncation (a per-user top-N, like it).
-- idents: unnoised
-- params: candidates
SELECT * FROM (
  {unnoised}
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
