-- rendering 1 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs0" AS
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input"
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 2 of 3; binds $max_contributions=2, $trunc_salt=4041988694836402461
CREATE TEMP TABLE "_duckdp_000000000000_vectors1" AS
WITH kept AS (       -- kept pairs with d (stage_truncate.sql)
  SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM "_duckdp_000000000000_pairs0" WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM "_duckdp_000000000000_pairs0" WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
)
SELECT _dp_user, _dp_k0, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_uw FROM kept

-- rendering 3 of 3; binds $max_contributions=2, $trunc_salt=4495534904771661033
CREATE TEMP TABLE "_duckdp_000000000000_vectors24" AS
WITH kept AS (       -- kept round-2 pairs with d
  WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT _dp_user, _dp_k0
FROM "_duckdp_000000000000_pairs0" AS p
ANTI JOIN (SELECT _dp_k0 FROM "_duckdp_000000000000_status2" WHERE _dp_round2 = false) AS out USING (_dp_k0)
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
)
SELECT _dp_user, _dp_k0, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_v, 1.0 / sqrt(_dp_d) AS _dp_uw, false AS _dp_biased
FROM kept
