-- Each user's item ids, one row per user, for the sequential update loop (Gopi et al. journal
-- Alg. 2). Users come in keyed-hash order, fixed before any update and independent of the other
-- users' data; each list is ranked by the user's row count for the key (GW; 1 for the policies),
-- ties broken by a keyed hash of the key: one secret order shared by all users, so users with
-- tied keys favour the same ones (GW), and float sums are reproducible under a seed.
-- idents: pairs, items, keys
-- params: order_salt, tie_salt
SELECT list(_dp_item ORDER BY _dp_n DESC, hash(xor(hash({keys}), $tie_salt)), _dp_item) AS _dp_items
FROM {pairs} JOIN {items} USING ({keys})
GROUP BY _dp_user
ORDER BY hash(xor(hash(_dp_user), $order_salt)), _dp_user
