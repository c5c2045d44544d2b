-- Private GROUP BY stage 2 under truncation="global" (mechanisms/aggregate/duckdb.py `key_measures`): of the pairs
-- {pairs} (agg_pairs.sql over agg_ranked_rows.sql, grouped by (user, key rank `_dp_r`): a stored table, or a CTE:
-- stage_with.sql), each user keeps every pair where they have at most Δ0, else the Δ0 of least key rank: those
-- ranked at most `_dp_t`, the user's Δ0-th least rank (ranks are distinct, so exactly Δ0 pairs). These are the
-- pairs stage_truncate_window.sql keeps under the same salt (its order is the ranks' order, agg_key_ranks.sql),
-- computed from a top-Δ0 state of integers per user over Δ0 instead of Δ0 whole pairs: one query at any size. The
-- users over Δ0 are found by a count per user, not by joining every pair to its user's count. A fixed function of
-- the user's own pairs, the key set and the salt (DESIGN §3).
-- idents: pairs
-- params: max_contributions
SELECT * FROM (
  WITH over AS (       -- the users with more than Δ0 pairs
    SELECT _dp_user FROM {pairs} GROUP BY _dp_user HAVING count(*) > $max_contributions
  ), heavy AS (        -- their pairs
    SELECT * FROM {pairs} SEMI JOIN over USING (_dp_user)
  ), cut AS (          -- each user over Δ0: the Δ0-th least rank of their keys
    SELECT _dp_user, list_max(arg_min(_dp_r, _dp_r, $max_contributions)) AS _dp_t FROM heavy GROUP BY _dp_user
  )
  SELECT p.* FROM {pairs} AS p ANTI JOIN over USING (_dp_user)
  UNION ALL
  SELECT h.* FROM heavy AS h JOIN cut USING (_dp_user) WHERE h._dp_r <= cut._dp_t
)
