-- Stage `round_pairs`: the input's distinct (user, key) pairs with the key replaced by its id in the run's
-- dictionary (stage_key_ids.sql): {key_id} is the hash of the key columns where those are the ids, or where a few
-- keys share a hash their second candidate for those keys (stage_key_ids_shared.sql) and the hash for the rest,
-- computed from the pair's own key; where every key is numbered, the dictionary's id through {join}. {carried}
-- adds `_dp_h`, the hash of the key columns, for the truncation order where the order cannot read it off the id
-- (the same order either way: duckdp/counters.py, "Key ids").
-- idents: source, user, key_select, key_id, join, carried
-- params:
SELECT DISTINCT s._dp_user, {key_id} AS _dp_k0{carried}
FROM (SELECT {user} AS _dp_user, {key_select} FROM {source}) AS s{join}
