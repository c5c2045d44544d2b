-- rendering 1 of 2; binds $candidates=70, $trunc_salt=4495534904771661033
WITH unnoised AS (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM "_duckdp_000000000000_open3" WHERE _dp_level IS NULL) AS unnoised
), sizes AS (        -- each user's count of pairs not noised yet, and the first of them
  SELECT _dp_user, count(*) AS _dp_size, min(_dp_order) AS _dp_first FROM unnoised GROUP BY _dp_user
)
SELECT u.*, s._dp_size > $candidates AS _dp_cut FROM unnoised AS u JOIN sizes AS s USING (_dp_user)
WHERE s._dp_size <= $candidates OR u._dp_order = s._dp_first
   OR u._dp_order::DOUBLE < $candidates::DOUBLE / s._dp_size * 18446744073709551616.0

-- rendering 2 of 2; binds $candidates=73, $trunc_salt=4427371557954821508
WITH unnoised AS (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM (SELECT p.* FROM "_duckdp_000000000000_open3" AS p ANTI JOIN "_duckdp_000000000000_state5" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE p._dp_level IS NULL) AS o WHERE _dp_level IS NULL) AS unnoised
), sizes AS (        -- each user's count of pairs not noised yet, and the first of them
  SELECT _dp_user, count(*) AS _dp_size, min(_dp_order) AS _dp_first FROM unnoised GROUP BY _dp_user
)
SELECT u.*, s._dp_size > $candidates AS _dp_cut FROM unnoised AS u JOIN sizes AS s USING (_dp_user)
WHERE s._dp_size <= $candidates OR u._dp_order = s._dp_first
   OR u._dp_order::DOUBLE < $candidates::DOUBLE / s._dp_size * 18446744073709551616.0
