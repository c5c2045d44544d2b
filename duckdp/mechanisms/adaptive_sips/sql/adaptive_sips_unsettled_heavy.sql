-- Adaptive SIPS with lazy noise, a run with heavy users (adaptive_sips_heavy.sql; without any, the same
-- check is adaptive_sips_unsettled.sql): the users whose R'_u ({kept}: adaptive_sips_remaining_open.sql, or
-- adaptive_sips_remaining.sql in the last round, every candidate key now with a state row) may not settle
-- R̃_u. An ordinary user is checked when cut (`_dp_cut`: pairs may lie past its candidates,
-- adaptive_sips_candidates.sql): unsettled with fewer than Δ0 candidates in play before the last one. A
-- heavy user ({heavy}: its open pairs are its prefixes, adaptive_sips_prefixes.sql) is always checked, cut at
-- `{bound}`, this round's bound, or at its last candidate's order if that is nearer and its candidates were
-- cut: unsettled with fewer than Δ0 pairs of R'_u strictly before the cut ({order}: this round's truncation
-- order). For the others every pair of R_u ordered before the cut is in R'_u, and Δ0 of them are
-- (duckdp/mechanisms/adaptive_sips/duckdb.py, `remaining`).
-- ({kept} holds the heavy users' rows alone.)
-- idents: candidates, state, match, heavy, bound, kept, order
-- params: max_contributions
WITH c AS (          -- each candidate pair of a cut user with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM {candidates} AS c JOIN {state} AS s ON {match} WHERE c._dp_cut
), cut AS (          -- the cut users, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user
), heavy AS (        -- the heavy users with this round's bound, and their last candidate's order when cut
  SELECT h._dp_user, h.{bound} AS _dp_bound, cut._dp_last FROM {heavy} AS h LEFT JOIN cut USING (_dp_user)
), ahead AS (        -- each heavy user's count of R'_u's pairs before its cut
  SELECT _dp_user, count(*) AS _dp_ahead
  FROM (SELECT _dp_user, {order} AS _dp_order FROM ({kept}) AS k) AS r
  JOIN heavy USING (_dp_user)
  WHERE r._dp_order::DOUBLE < heavy._dp_bound AND (heavy._dp_last IS NULL OR r._dp_order < heavy._dp_last)
  GROUP BY _dp_user
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user) ANTI JOIN {heavy} AS h USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions
UNION ALL
SELECT _dp_user FROM heavy LEFT JOIN ahead USING (_dp_user) WHERE coalesce(_dp_ahead, 0) < $max_contributions
