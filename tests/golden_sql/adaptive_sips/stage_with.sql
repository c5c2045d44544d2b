-- rendering 1 of 3; binds $max_contributions=2, $trunc_salt=4041988694836402461
WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT *, 1.0::DOUBLE AS _dp_level FROM "_duckdp_000000000000_pairs0"
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions

-- rendering 2 of 3; binds $max_contributions=2, $trunc_salt=4495534904771661033
WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT * FROM "_duckdp_000000000000_open3" WHERE _dp_level > 0
UNION ALL
SELECT c.* EXCLUDE (_dp_order, _dp_cut), s._dp_level FROM "_duckdp_000000000000_candidates4" AS c JOIN "_duckdp_000000000000_state1" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE s._dp_level > 0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions

-- rendering 3 of 3; binds $max_contributions=2, $trunc_salt=4427371557954821508
WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT p.* EXCLUDE (_dp_level), s._dp_level FROM "_duckdp_000000000000_open3" AS p JOIN "_duckdp_000000000000_state5" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE s._dp_level > 0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
