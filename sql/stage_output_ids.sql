-- Stage `output` on key ids: the dictionary's key columns (stage_key_ids.sql) of the ids in {keys_query},
-- under the input's column names, sorted by the key columns exactly as stage_output.sql sorts them (ORDER
-- BY ALL): the same rows, order and types as on the key columns; the ids are never output.
-- idents: dictionary, keys_query, key_output
-- params:
SELECT {key_output} FROM {dictionary} WHERE _dp_id IN (SELECT _dp_k0 FROM ({keys_query})) ORDER BY ALL
