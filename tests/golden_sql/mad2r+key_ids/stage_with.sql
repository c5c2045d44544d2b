-- rendering 1 of 1; binds $max_contributions=2, $trunc_salt=4495534904771661033
WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT _dp_user, _dp_k0
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p LEFT JOIN "_duckdp_000000000000_cuts8" AS c USING (_dp_user)
WHERE c._dp_last IS NULL OR hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) <= c._dp_last) AS p
ANTI JOIN (SELECT _dp_k0 FROM "_duckdp_000000000000_status3" WHERE _dp_round2 = false) AS out USING (_dp_k0)
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
