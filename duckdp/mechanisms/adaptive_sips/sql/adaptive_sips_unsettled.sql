-- Adaptive SIPS with lazy noise: the users whose candidates (adaptive_sips_candidates.sql, every key
-- now with a state row) may not settle R̃_u. A user is checked when cut (`_dp_cut`: pairs may lie past the
-- candidates; cut at the last candidate's order, strictly before it) or heavy ({heavy}: its open pairs are
-- a prefix of its pairs, cut at `{bound}`, this round's bound, strictly below it); both: the nearer cut.
-- Unsettled: fewer than Δ0 candidates in play before the cut, or a heavy user with no candidate at all.
-- For the others every pair of R_u ordered before the cut has a state row in play (noised earlier, or a
-- candidate) and is in R'_u, and Δ0 of them are (duckdp/mechanisms/adaptive_sips/duckdb.py, `remaining`).
-- idents: candidates, state, match, heavy, bound
-- params: max_contributions
WITH c AS (          -- each candidate pair of a checked user with its key's level and the user's bound
  SELECT c._dp_user, c._dp_order, c._dp_cut, s._dp_level, h.{bound} AS _dp_bound
  FROM {candidates} AS c JOIN {state} AS s ON {match} LEFT JOIN {heavy} AS h ON c._dp_user = h._dp_user
  WHERE c._dp_cut OR h.{bound} IS NOT NULL
), cut AS (          -- the checked users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND (NOT _dp_cut OR _dp_order < _dp_last)
                        AND (_dp_bound IS NULL OR _dp_order::DOUBLE < _dp_bound)) < $max_contributions
UNION ALL
SELECT _dp_user FROM {heavy} AS h ANTI JOIN {candidates} AS c ON h._dp_user = c._dp_user
