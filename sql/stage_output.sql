-- Stage `output`: key frames back under the input's column names, sorted by the key columns
-- (ORDER BY ALL: every key column in order, a total order on any key type; keys are never NULL).
-- The order is then a function of the released set alone: DuckDB's hash aggregates and joins emit
-- groups in an order that depends on keys never released, input order and thread scheduling.
-- idents: keys_query, key_output
-- params:
SELECT {key_output} FROM ({keys_query}) ORDER BY ALL
