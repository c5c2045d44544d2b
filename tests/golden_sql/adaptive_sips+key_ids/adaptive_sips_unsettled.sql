-- rendering 1 of 2; binds $max_contributions=2
WITH c AS (          -- each candidate pair of a checked user with its key's level and the user's bound
  SELECT c._dp_user, c._dp_order, c._dp_cut, s._dp_level, h._dp_b0 AS _dp_bound
  FROM "_duckdp_000000000000_candidates6" AS c JOIN "_duckdp_000000000000_state2" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0 LEFT JOIN "_duckdp_000000000000_heavy4" AS h ON c._dp_user = h._dp_user
  WHERE c._dp_cut OR h._dp_b0 IS NOT NULL
), cut AS (          -- the checked users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND (NOT _dp_cut OR _dp_order < _dp_last)
                        AND (_dp_bound IS NULL OR _dp_order::DOUBLE < _dp_bound)) < $max_contributions
UNION ALL
SELECT _dp_user FROM "_duckdp_000000000000_heavy4" AS h ANTI JOIN "_duckdp_000000000000_candidates6" AS c ON h._dp_user = c._dp_user

-- rendering 2 of 2; binds $max_contributions=2
WITH c AS (          -- each candidate pair of a checked user with its key's level and the user's bound
  SELECT c._dp_user, c._dp_order, c._dp_cut, s._dp_level, h._dp_b1 AS _dp_bound
  FROM "_duckdp_000000000000_candidates10" AS c JOIN "_duckdp_000000000000_state8" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0 LEFT JOIN "_duckdp_000000000000_heavy4" AS h ON c._dp_user = h._dp_user
  WHERE c._dp_cut OR h._dp_b1 IS NOT NULL
), cut AS (          -- the checked users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND (NOT _dp_cut OR _dp_order < _dp_last)
                        AND (_dp_bound IS NULL OR _dp_order::DOUBLE < _dp_bound)) < $max_contributions
UNION ALL
SELECT _dp_user FROM "_duckdp_000000000000_heavy4" AS h ANTI JOIN "_duckdp_000000000000_candidates10" AS c ON h._dp_user = c._dp_user
