-- Stage `round_pairs`, the keys that share a hash (duckdp/counters.py, "Key ids"): where a few keys of a `hashable`
-- type share their hash (DuckDB's string hash from ~7.6M keys), only they need another id. {shared} lists their
-- hash `_dp_h` and their second id candidate {second} (counters.second_id_sql: a function of the key alone), which
-- DuckDBStages.round_pairs keeps where those are distinct and none is a key's hash (`ids_clash`). Each pair then
-- computes its id from its own key (stage_pairs_ids.sql); among keys of one hash the ids follow the second
-- candidate, so a truncation tie between them broken on the id is broken on a function of the keys
-- (DuckDBStages.truncation_ties), the same whichever other keys are present.
-- idents: shared, target, second
-- params:
CREATE TEMP TABLE {shared} AS
SELECT _dp_id AS _dp_h, {second} AS _dp_id FROM temp.main.{target}
WHERE _dp_id IN (SELECT _dp_id FROM temp.main.{target} GROUP BY _dp_id HAVING count(*) > 1)
