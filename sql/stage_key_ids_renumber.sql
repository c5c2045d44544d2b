-- Stage `round_pairs`: the dictionary's keys that share a hash (stage_key_ids_shared.sql's {shared}) take their
-- second id candidate {second}, so the output stage maps every released id back to its key.
-- idents: target, shared, second
-- params:
UPDATE temp.main.{target} SET _dp_id = {second} WHERE _dp_id IN (SELECT _dp_h FROM temp.main.{shared})
