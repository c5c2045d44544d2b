-- rendering 1 of 2; binds $candidates=70, $trunc_salt=4495534904771661033
WITH unnoised AS (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM "_duckdp_000000000000_open3" WHERE _dp_level IS NULL) AS unnoised
), sizes AS (        -- each user's count of pairs not noised yet
  SELECT _dp_user, count(*) AS _dp_size FROM unnoised GROUP BY _dp_user
), sized AS (
  SELECT unnoised.*, sizes._dp_size FROM unnoised JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size) FROM sized WHERE _dp_size <= $candidates
UNION ALL
SELECT * EXCLUDE (_dp_size) FROM sized WHERE _dp_size > $candidates
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 2 of 2; binds $candidates=73, $trunc_salt=4427371557954821508
WITH unnoised AS (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM "_duckdp_000000000000_open7" WHERE _dp_level IS NULL) AS unnoised
), sizes AS (        -- each user's count of pairs not noised yet
  SELECT _dp_user, count(*) AS _dp_size FROM unnoised GROUP BY _dp_user
), sized AS (
  SELECT unnoised.*, sizes._dp_size FROM unnoised JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size) FROM sized WHERE _dp_size <= $candidates
UNION ALL
SELECT * EXCLUDE (_dp_size) FROM sized WHERE _dp_size > $candidates
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
