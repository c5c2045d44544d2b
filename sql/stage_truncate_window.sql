-- Stage `truncate`, the truncation order (Gopi et al. ICML'20 §1.1): each user of {sized} over Δ0
-- keeps the Δ0 pairs of smallest keyed hash of {hashed} under a fresh salt, with `_dp_d` = Δ0.
-- truncation="per_user": {hashed} = (user, key), a uniform subset per user, independent across users;
-- truncation="global": {hashed} = the key alone, one secret order of the keys that every user follows.
-- Either is a fixed function of the user's own pairs and the secret salt (DESIGN §3). Ties in the order
-- are harmless: any fixed per-user choice of Δ0 keys bounds the user's contribution. The one place this
-- order is written: stage_truncate.sql (one query) and stage_truncate_pass.sql (user-hash passes) fill it in.
-- idents: sized, hashed
-- params: max_contributions, trunc_salt
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM {sized} WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user
                           ORDER BY hash(xor(hash({hashed}), $trunc_salt))) <= $max_contributions
