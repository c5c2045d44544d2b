-- Private GROUP BY stage 2 under truncation="global" (mechanisms/aggregate/duckdb.py `key_measures`): of the sized
-- pairs {sized} (a stored table, or a CTE: stage_with.sql; agg_pairs.sql over the rows restricted to the key set,
-- with |W_u| as `_dp_size`), each user keeps every pair within Δ0, else the Δ0 of least key rank {ranks}
-- (agg_key_ranks.sql): those ranked at most `_dp_t`, the user's Δ0-th least rank (ranks are distinct, so exactly Δ0
-- pairs). These are the pairs
-- stage_truncate_window.sql keeps under the same salt (its order is the ranks' order), computed from a top-Δ0 state
-- of integers per user over Δ0 instead of Δ0 whole pairs: one query at any size. A fixed function of the user's
-- own pairs, the key set and the salt (DESIGN §3).
-- idents: sized, ranks, keys
-- params: max_contributions
SELECT * FROM (
  WITH heavy AS (        -- the pairs of the users over Δ0, with their key's rank (a join on the small key set)
    SELECT s.*, r._dp_r FROM {sized} AS s JOIN {ranks} AS r USING ({keys}) WHERE s._dp_size > $max_contributions
  ), cut AS (          -- each user over Δ0: the Δ0-th least rank of their keys
    SELECT _dp_user, list_max(arg_min(_dp_r, _dp_r, $max_contributions)) AS _dp_t FROM heavy GROUP BY _dp_user
  )
  SELECT * EXCLUDE (_dp_size) FROM {sized} WHERE _dp_size <= $max_contributions
  UNION ALL
  SELECT h.* EXCLUDE (_dp_size, _dp_r) FROM heavy AS h JOIN cut USING (_dp_user) WHERE h._dp_r <= cut._dp_t
)
