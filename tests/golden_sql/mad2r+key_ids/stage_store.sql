-- rendering 1 of 6; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs1" AS
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input") AS s
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 2 of 6; binds $max_contributions=2, $trunc_salt=4041988694836402461
CREATE TEMP TABLE "_duckdp_000000000000_vectors2" AS
WITH kept AS (       -- kept pairs with d (stage_truncate.sql)
  SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM "_duckdp_000000000000_pairs1" WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM "_duckdp_000000000000_pairs1" WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
)
SELECT _dp_user, _dp_k0, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_uw FROM kept

-- rendering 3 of 6; binds $candidates=69, $trunc_salt=4495534904771661033
CREATE TEMP TABLE "_duckdp_000000000000_candidates5" AS
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
  FROM (SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p ANTI JOIN "_duckdp_000000000000_vectors2" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 4 of 6; binds $candidates=69, $max_contributions=2
CREATE TEMP TABLE "_duckdp_000000000000_unsettled7" AS
WITH c AS (          -- each candidate pair: its order and whether it stays for round 2
  SELECT c._dp_user, c._dp_order, s._dp_round2 IS NOT false AS _dp_in
  FROM "_duckdp_000000000000_candidates5" AS c LEFT JOIN "_duckdp_000000000000_status3" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
), cut AS (          -- users cut at the limit, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user HAVING count(*) >= $candidates
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_in AND _dp_order < _dp_last) < $max_contributions

-- rendering 5 of 6; binds $candidates=69
CREATE TEMP TABLE "_duckdp_000000000000_cuts8" AS
SELECT _dp_user, max(_dp_order) AS _dp_last
FROM (SELECT c.* FROM "_duckdp_000000000000_candidates5" AS c ANTI JOIN "_duckdp_000000000000_unsettled7" AS u USING (_dp_user)) AS settled
GROUP BY _dp_user HAVING count(*) >= $candidates

-- rendering 6 of 6; binds $max_contributions=2, $trunc_salt=4495534904771661033
CREATE TEMP TABLE "_duckdp_000000000000_vectors29" AS
WITH kept AS (       -- kept round-2 pairs with d
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
)
SELECT _dp_user, _dp_k0, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_v, 1.0 / sqrt(_dp_d) AS _dp_uw, false AS _dp_biased
FROM kept
