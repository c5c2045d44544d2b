-- Stage `round_pairs`: the dictionary (stage_key_ids.sql) takes the shared keys' ids from {shared}
-- (stage_key_ids_shared.sql), so the output stage maps every released id back to its key.
-- idents: target, shared, match
-- params:
UPDATE temp.main.{target} AS d SET _dp_id = c._dp_id FROM temp.main.{shared} AS c WHERE {match}
