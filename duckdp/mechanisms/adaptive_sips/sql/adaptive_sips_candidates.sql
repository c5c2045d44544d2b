-- Adaptive SIPS rounds ≥ 2 with lazy noise: each user's first $candidates pairs not noised yet
-- (adaptive_sips_unnoised_pairs.sql) in the order of this round's truncation (a per-user top-N, like it).
-- As stage_truncate.sql does, only users over the limit are ranked; the rest keep all their pairs.
-- idents: unnoised
-- params: candidates
WITH unnoised AS (
  {unnoised}
), sizes AS (        -- each user's count of pairs not noised yet
  SELECT _dp_user, count(*) AS _dp_size FROM unnoised GROUP BY _dp_user
), sized AS (
  SELECT unnoised.*, sizes._dp_size FROM unnoised JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size) FROM sized WHERE _dp_size <= $candidates
UNION ALL
SELECT * EXCLUDE (_dp_size) FROM sized WHERE _dp_size > $candidates
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
