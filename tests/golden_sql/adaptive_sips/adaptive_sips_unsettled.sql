-- rendering 1 of 2; binds $max_contributions=2, $trunc_salt=4495534904771661033
WITH c AS (          -- each candidate pair of a cut user with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM "_duckdp_000000000000_candidates5" AS c JOIN "_duckdp_000000000000_state1" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE c._dp_cut
), cut AS (          -- the cut users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
), heavy AS (        -- the heavy users with this round's bound, and their last candidate's order when cut
  SELECT h._dp_user, h._dp_b0 AS _dp_bound, cut._dp_last FROM "_duckdp_000000000000_heavy3" AS h LEFT JOIN cut USING (_dp_user)
), ahead AS (        -- each heavy user's count of R'_u's pairs before its cut
  SELECT _dp_user, count(*) AS _dp_ahead
  FROM (SELECT _dp_user, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order FROM (SELECT * FROM (SELECT * FROM "_duckdp_000000000000_open4" LIMIT 0) WHERE _dp_level > 0
UNION ALL
SELECT c.* EXCLUDE (_dp_order, _dp_cut), s._dp_level FROM (SELECT * FROM "_duckdp_000000000000_candidates5" LIMIT 0) AS c JOIN "_duckdp_000000000000_state1" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE s._dp_level > 0) AS k) AS r
  JOIN heavy USING (_dp_user)
  WHERE r._dp_order::DOUBLE < heavy._dp_bound AND (heavy._dp_last IS NULL OR r._dp_order < heavy._dp_last)
  GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user) ANTI JOIN "_duckdp_000000000000_heavy3" AS h USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions
UNION ALL
SELECT _dp_user FROM heavy LEFT JOIN ahead USING (_dp_user) WHERE coalesce(_dp_ahead, 0) < $max_contributions

-- rendering 2 of 2; binds $max_contributions=2, $trunc_salt=4427371557954821508
WITH c AS (          -- each candidate pair of a cut user with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM "_duckdp_000000000000_candidates8" AS c JOIN "_duckdp_000000000000_state6" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE c._dp_cut
), cut AS (          -- the cut users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
), heavy AS (        -- the heavy users with this round's bound, and their last candidate's order when cut
  SELECT h._dp_user, h._dp_b1 AS _dp_bound, cut._dp_last FROM "_duckdp_000000000000_heavy3" AS h LEFT JOIN cut USING (_dp_user)
), ahead AS (        -- each heavy user's count of R'_u's pairs before its cut
  SELECT _dp_user, count(*) AS _dp_ahead
  FROM (SELECT _dp_user, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order FROM (SELECT p.* EXCLUDE (_dp_level), s._dp_level FROM (SELECT * FROM "_duckdp_000000000000_open4" LIMIT 0) AS p JOIN "_duckdp_000000000000_state6" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE s._dp_level > 0) AS k) AS r
  JOIN heavy USING (_dp_user)
  WHERE r._dp_order::DOUBLE < heavy._dp_bound AND (heavy._dp_last IS NULL OR r._dp_order < heavy._dp_last)
  GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user) ANTI JOIN "_duckdp_000000000000_heavy3" AS h USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions
UNION ALL
SELECT _dp_user FROM heavy LEFT JOIN ahead USING (_dp_user) WHERE coalesce(_dp_ahead, 0) < $max_contributions
