-- MAD2R round-2 pairs (spec §6 steps a–b): the users' sets shrink to the keys {status} keeps for
-- round 2 (a key without a row there stays, with β = 1: the MAD2R screen stores only the
-- exceptions), with the pair's carried columns ({carried}: `, p._dp_h` on joined key ids, else empty).
-- The keys left out (released or removed: `_dp_round2` false) go by an anti-join rather than every pair
-- probing every status row (most status rows are removed keys). The biases b_i are joined after round 2's
-- truncation, to the kept pairs only (mad2r_kept_biases.sql): they are a function of the key, so the kept
-- pairs and their b_i are the same, and the truncation's per-user top-Δ0 carries no bias column.
-- idents: pairs, keys, status, carried
-- params:
SELECT _dp_user, {keys}{carried}
FROM {pairs} AS p
ANTI JOIN (SELECT {keys} FROM {status} WHERE _dp_round2 = false) AS out USING ({keys})
