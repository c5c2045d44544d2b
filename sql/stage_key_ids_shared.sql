-- Stage `round_pairs`, the ids of the keys that share a hash (duckdp/counters.py, "Key ids"): where a few keys of
-- a `hashable` type share their hash (a 64-bit hash, checked exactly; DuckDB's string hash from ~7.6M keys), only
-- they need another id. {shared} lists them with the ids 1, 2, … in (hash, key) order, so among keys of one hash
-- the ids are ordered as the keys are, and a truncation tie between them (their common `_dp_h`) broken on the id
-- is broken on the key (DuckDBStages.truncation_ties), whatever order the dictionary's rows were built in. Every
-- other key keeps its hash as its id, so the pairs look the shared keys up in this small table (stage_pairs_ids.sql)
-- instead of joining every row to the dictionary; DuckDBStages.round_pairs checks no hash is one of these ids.
-- idents: shared, target, keys
-- params:
CREATE TEMP TABLE {shared} AS
SELECT row_number() OVER (ORDER BY _dp_id, {keys})::UBIGINT AS _dp_id, {keys}
FROM temp.main.{target}
WHERE _dp_id IN (SELECT _dp_id FROM temp.main.{target} GROUP BY _dp_id HAVING count(*) > 1)
