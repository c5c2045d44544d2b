-- Adaptive SIPS with lazy noise: the users whose candidates (adaptive_sips_candidates.sql, every key
-- now with a state row) may not settle R̃_u: cut (`_dp_cut`: pairs may lie past the candidates), with
-- fewer than Δ0 candidates in play ordered before the last one. For the others every pair of R_u
-- ordered before the cut has a state row in play (noised earlier, or a candidate), and Δ0 of them do
-- when a cut was made.
-- idents: candidates, state, match
-- params: max_contributions
WITH c AS (          -- each candidate pair of a cut user with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM {candidates} AS c JOIN {state} AS s ON {match} WHERE c._dp_cut
), cut AS (          -- the cut users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions
