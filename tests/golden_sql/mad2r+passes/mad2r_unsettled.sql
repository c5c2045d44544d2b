-- rendering 1 of 1; binds $candidates=69, $max_contributions=2
WITH c AS (          -- each candidate pair: its order and whether it stays for round 2
  SELECT c._dp_user, c._dp_order, s._dp_round2 IS NOT false AS _dp_in
  FROM "_duckdp_000000000000_candidates6" AS c LEFT JOIN "_duckdp_000000000000_status4" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
), cut AS (          -- users cut at the limit, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user HAVING count(*) >= $candidates
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_in AND _dp_order < _dp_last) < $max_contributions
