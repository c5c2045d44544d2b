-- MAD2R with lazy round-1 noise: the users whose candidates (mad2r_candidates.sql, every key now
-- screened: a row in {status} when removed or biased) may not settle R̃_u: cut at $candidates pairs,
-- with fewer than Δ0 candidates kept for round 2 ordered before the last one. For the others every
-- pair of R_u ordered before the cut has a known screen (noised in round 1, or a candidate), and Δ0
-- of them are in R_u, so round 2's truncation keeps the same pairs whatever lies after the cut.
-- idents: candidates, status, match
-- params: candidates, max_contributions
WITH c AS (          -- each candidate pair: its order and whether it stays for round 2
  SELECT c._dp_user, c._dp_order, s._dp_round2 IS NOT false AS _dp_in
  FROM {candidates} AS c LEFT JOIN {status} AS s ON {match}
), cut AS (          -- users cut at the limit, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user HAVING count(*) >= $candidates
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_in AND _dp_order < _dp_last) < $max_contributions
