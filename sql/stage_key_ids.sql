-- Stage `round_pairs`, the run's key dictionary (duckdp/counters.py, "Key ids"): the input's distinct
-- keys, each with the id candidate {key_id} (a hash of its key columns); duckdp/stages/duckdb.py checks
-- the ids are distinct and otherwise replaces them by rowids. Rounds run on the ids; the output stage
-- maps the released ids back to these key columns (stage_output_ids.sql).
-- idents: target, source, key_select, key_id
-- params:
CREATE TEMP TABLE {target} AS
SELECT {key_id} AS _dp_id, * FROM (SELECT DISTINCT {key_select} FROM {source})
