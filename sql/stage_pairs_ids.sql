-- Stage `round_pairs`: the input's distinct (user, key) pairs with the key replaced by its id in the run's
-- dictionary (stage_key_ids.sql): {key_id} is the hash of the key columns where those are the ids; where a few
-- keys share a hash, the id from the small table of those keys ({join}: a LEFT JOIN, stage_key_ids_shared.sql)
-- or else the hash; where every key is numbered, the dictionary's id through {join}. Where ids are not all
-- hashes, {carried} adds `_dp_h`, the hash of the key columns, for the truncation order (the same order either
-- way: duckdp/counters.py, "Key ids").
-- idents: source, user, key_select, key_id, join, carried
-- params:
SELECT DISTINCT s._dp_user, {key_id} AS _dp_k0{carried}
FROM (SELECT {user} AS _dp_user, {key_select} FROM {source}) AS s{join}
