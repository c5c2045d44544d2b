-- Stage `append` by column name (sibling of stage_append.sql, which inserts by position): add rows whose
-- columns match the target's by name, in any order: MAD2R's exceptions, decided batch by batch from a view
-- read once (duckdp/mechanisms/mad/duckdb.py, add_exceptions), into its status table (mad2r_status.sql).
-- Inserting casts the Arrow keys back to the input's types (HUGEINT, UUID, BLOB, lists, structs).
-- idents: target, query
-- params:
INSERT INTO {target} BY NAME
{query}
