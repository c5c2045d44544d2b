-- Private GROUP BY stage 5 under truncation="global" (mechanisms/aggregate/duckdb.py `key_measures`): each key of
-- the key set {keyset}, as it is (agg_measures.sql's rows), with its rank `_dp_r` in {ranks} (agg_key_ranks.sql,
-- the set's distinct keys: one rank per key), by which agg_measures.sql finds its sums.
-- idents: keyset, ranks, keys
-- params:
SELECT k.*, r._dp_r FROM {keyset} AS k JOIN {ranks} AS r USING ({keys})
