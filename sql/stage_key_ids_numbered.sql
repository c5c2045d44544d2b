-- Stage `round_pairs`, rowid ids (duckdp/counters.py, "Key ids"): where the keys' hashes do not follow key
-- equality (not `hashable`), or collide and the shared keys' second candidates clash (stage_key_ids_shared.sql),
-- the dictionary's ids become numbers injective over its keys. A key whose hash no other key shares keeps its
-- row's rowid (< N, the dictionary's size); the keys that share a hash (few: a 64-bit hash, checked exactly) are
-- numbered N + 1, N + 2, … in (hash, {second}, key) order, so among keys of one hash the ids follow (second
-- candidate, key), as the second candidates do where they are the ids, and a truncation tie between colliding
-- hashes (`_dp_h`) broken on the id is broken on a function of the keys (DuckDBStages.truncation_ties), whatever
-- order the dictionary's rows were built in. Only the colliding keys are sorted: numbering every key in key order
-- sorted all the strings (1.7 s of mad's 11.5 s at 30M VARCHAR rows, 16 threads; benchmarks/RESULTS.md "16-core
-- device, main 595edbf").
-- idents: target, keys, second
-- params:
CREATE OR REPLACE TEMP TABLE {target} AS
WITH _dp_shared AS (SELECT _dp_id FROM temp.main.{target} GROUP BY _dp_id HAVING count(*) > 1)
SELECT rowid::UBIGINT AS _dp_id, * EXCLUDE (_dp_id) FROM temp.main.{target}
WHERE _dp_id NOT IN (SELECT _dp_id FROM _dp_shared)
UNION ALL
SELECT ((SELECT count(*) FROM temp.main.{target}) + row_number() OVER (ORDER BY _dp_id, {second}, {keys}))::UBIGINT
       AS _dp_id, * EXCLUDE (_dp_id)
FROM temp.main.{target} WHERE _dp_id IN (SELECT _dp_id FROM _dp_shared)
