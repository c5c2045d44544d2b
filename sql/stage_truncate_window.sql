-- Stage `truncate`, the truncation order (Gopi et al. ICML'20 §1.1): each user of {sized} over Δ0
-- keeps the Δ0 pairs of smallest keyed hash of (user, key) under a fresh salt (a uniform subset,
-- fixed given the salt), with `_dp_d` = Δ0. Ties in the order are harmless: any fixed per-user choice
-- of Δ0 keys bounds the user's contribution. The one place this order is written: stage_truncate.sql
-- (one query) and stage_truncate_pass.sql (user-hash passes) both fill it in.
-- idents: sized, keys
-- params: max_contributions, trunc_salt
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM {sized} WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user
                           ORDER BY hash(xor(hash(_dp_user, {keys}), $trunc_salt))) <= $max_contributions
