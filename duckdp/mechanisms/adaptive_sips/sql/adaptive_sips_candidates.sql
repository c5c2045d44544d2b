-- Adaptive SIPS rounds ≥ 2 with lazy noise: each user's first pairs not noised yet
-- (adaptive_sips_unnoised_pairs.sql) in the order of this round's truncation: all of a user's n when
-- n ≤ $candidates (m), else those whose order (a keyed hash, uniform on [0, 2⁶⁴)) lies below m/n of its
-- range, about m of them, and always the first. Either way a prefix of the user's order (a threshold on
-- a monotone function of it), found without ranking; `_dp_cut` marks users that may have pairs past it
-- (adaptive_sips_unsettled.sql checks them).
-- idents: unnoised
-- params: candidates
WITH unnoised AS (
  {unnoised}
), sizes AS (        -- each user's count of pairs not noised yet, and the first of them
  SELECT _dp_user, count(*) AS _dp_size, min(_dp_order) AS _dp_first FROM unnoised GROUP BY _dp_user
)
SELECT u.*, s._dp_size > $candidates AS _dp_cut FROM unnoised AS u JOIN sizes AS s USING (_dp_user)
WHERE s._dp_size <= $candidates OR u._dp_order = s._dp_first
   OR u._dp_order::DOUBLE < $candidates::DOUBLE / s._dp_size * 18446744073709551616.0
