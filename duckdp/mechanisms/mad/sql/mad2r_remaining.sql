-- MAD2R round-2 pairs (spec §6 steps a–b): the users' sets shrink to the keys {status} keeps for
-- round 2 (a key without a row there stays, with β = 1: the MAD2R screen stores only the
-- exceptions); each pair carries its key's clipped bias b_i = clip(β_i, β_min, 1) (§4) and the
-- pair's carried columns ({carried}: `, p._dp_h` on joined key ids, else empty). The keys left out
-- (released or removed: `_dp_round2` false) go by an anti-join and the biases come from the other
-- status rows (few: biased keys left for round 2), rather than every pair probing every status row
-- for its columns: the same pairs and b_i, at less cost (most status rows are removed keys).
-- idents: pairs, keys, status, carried
-- params: beta_min
SELECT _dp_user, {keys}{carried}, greatest(least(coalesce(_dp_beta, 1.0), 1.0), $beta_min) AS _dp_b
FROM {pairs} AS p
ANTI JOIN (SELECT {keys} FROM {status} WHERE _dp_round2 = false) AS out USING ({keys})
LEFT JOIN (SELECT {keys}, _dp_beta FROM {status} WHERE _dp_round2 IS NOT false) AS kept USING ({keys})
