-- Private GROUP BY stage 1 under truncation="global" (mechanisms/aggregate/duckdb.py `key_measures`): the input's
-- rows under internal names (user, keys, value columns `_dp_v<j>`) whose key is in the ranked key set {ranks}
-- (agg_key_ranks.sql), each with its key's rank `_dp_r`: an inner join on {match}, one rank per row (the ranks'
-- keys are distinct as `=` compares them; keys are never NULL, refused by the run). From here on a pair is
-- (user, rank) — one integer for the key, whatever its type or number of columns: the pairs' grouping, the cut
-- and the per-key sums hash integers, not strings. For a fixed key set a per-user function of the user's own rows.
-- idents: source, user, key_select, values, ranks, match
-- params:
SELECT r.*, k._dp_r FROM (SELECT {user} AS _dp_user, {key_select}{values} FROM {source}) AS r
JOIN {ranks} AS k ON {match}
