-- Stage `truncate`, the truncation order (Gopi et al. ICML'20 §1.1): each user of {sized} over Δ0
-- keeps the Δ0 pairs first in {order} (stage_truncation_order.sql: the keyed hash under a fresh salt of
-- (user, key) — truncation="per_user", a uniform subset per user, independent across users — or of the
-- key alone — truncation="global", one secret order of the keys that every user follows), ties broken on
-- {ties} (the key, where hashes can collide: DuckDBStages.truncation_ties), with `_dp_d` = Δ0. Either is a
-- fixed function of the user's own pairs and the secret salt (DESIGN §3), never of the order rows arrive
-- in. As one struct the order keeps DuckDB's per-user top-N plan. stage_truncate.sql (one query) and
-- stage_truncate_pass.sql (user-hash passes) fill this window in.
-- idents: sized, order, ties
-- params: max_contributions
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM {sized} WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row({order}{ties})) <= $max_contributions
