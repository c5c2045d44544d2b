-- rendering 1 of 3; binds $exponent=0.5, $max_contributions=2, $trunc_salt=4041988694836402461
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH kept AS (       -- kept (user, key) pairs with d (stage_truncate.sql)
  WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT p.* FROM (SELECT * FROM "_duckdp_000000000000_pairs0") AS p ANTI JOIN (SELECT * FROM "_duckdp_000000000000_released1") AS r ON p._dp_k0 IS NOT DISTINCT FROM r._dp_k0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_k0), $trunc_salt)))) <= $max_contributions
)
SELECT _dp_k0, sum(pow(_dp_d, -$exponent)) AS _dp_w FROM kept GROUP BY _dp_k0)

-- rendering 2 of 3; binds $exponent=0.5, $max_contributions=2, $trunc_salt=4495534904771661033
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH kept AS (       -- kept (user, key) pairs with d (stage_truncate.sql)
  WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT p.* FROM (SELECT * FROM "_duckdp_000000000000_pairs0") AS p ANTI JOIN (SELECT * FROM "_duckdp_000000000000_released1") AS r ON p._dp_k0 IS NOT DISTINCT FROM r._dp_k0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_k0), $trunc_salt)))) <= $max_contributions
)
SELECT _dp_k0, sum(pow(_dp_d, -$exponent)) AS _dp_w FROM kept GROUP BY _dp_k0)

-- rendering 3 of 3; binds $exponent=0.5, $max_contributions=2, $trunc_salt=4427371557954821508
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH kept AS (       -- kept (user, key) pairs with d (stage_truncate.sql)
  WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT p.* FROM (SELECT * FROM "_duckdp_000000000000_pairs0") AS p ANTI JOIN (SELECT * FROM "_duckdp_000000000000_released1") AS r ON p._dp_k0 IS NOT DISTINCT FROM r._dp_k0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_k0), $trunc_salt)))) <= $max_contributions
)
SELECT _dp_k0, sum(pow(_dp_d, -$exponent)) AS _dp_w FROM kept GROUP BY _dp_k0)
