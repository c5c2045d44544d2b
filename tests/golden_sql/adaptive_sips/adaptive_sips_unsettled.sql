-- rendering 1 of 2; binds $max_contributions=2
WITH c AS (          -- each candidate pair of a cut user with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM "_duckdp_000000000000_candidates4" AS c JOIN "_duckdp_000000000000_state1" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE c._dp_cut
), cut AS (          -- the cut users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions

-- rendering 2 of 2; binds $max_contributions=2
WITH c AS (          -- each candidate pair of a cut user with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM "_duckdp_000000000000_candidates7" AS c JOIN "_duckdp_000000000000_state5" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE c._dp_cut
), cut AS (          -- the cut users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions
