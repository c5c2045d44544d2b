-- Private GROUP BY stage 2 under truncation="global" (mechanisms/aggregate/duckdb.py `key_measures`): each key of
-- the key set {keyset} (distinct as GROUP BY sees keys: −0.0 is 0.0, one NaN) with its rank `_dp_r` (1, 2, …) in
-- the truncation's secret key order {order} (stage_truncation_order.sql over the key columns), ties of the keyed
-- hash broken on {ties} exactly as stage_truncate_window.sql breaks them (DuckDBStages.truncation_ties). A user's
-- Δ0 first keys in that order are then the Δ0 of least rank: one integer per key, no tie left.
-- idents: keyset, keys, order, ties
-- params:
SELECT {keys}, row_number() OVER (ORDER BY {order}{ties}) AS _dp_r
FROM (SELECT DISTINCT {keys} FROM {keyset} AS k)
