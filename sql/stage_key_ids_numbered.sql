-- Stage `round_pairs`, rowid ids (duckdp/counters.py, "Key ids"): where the keys' hashes collide, or do
-- not follow key equality, the dictionary's ids become the keys' positions in key order. Injective, and
-- ordered as the keys are, so a truncation tie between colliding hashes (`_dp_h`) broken on the id is
-- broken on the key (DuckDBStages.truncation_order), whatever order the dictionary's rows were built in.
-- idents: target, keys
-- params:
CREATE OR REPLACE TEMP TABLE {target} AS
SELECT (row_number() OVER (ORDER BY {keys}))::UBIGINT AS _dp_id, * EXCLUDE (_dp_id) FROM temp.main.{target}
