-- Stage `truncate` (Gopi et al. ICML'20 §1.1): each user keeps at most Δ0 keys, those of smallest
-- keyed hash of (user, key), or of the key under truncation="global", under a fresh salt ({window}:
-- stage_truncate_window.sql over {sized}, or stage_truncate_cut.sql: the same pairs, DuckDBStages.cut_applies).
-- Only users over Δ0 are ranked with a window; the rest keep everything. `_dp_d` = min(|W_u|, Δ0).
-- The one truncation every mechanism uses (large inputs: the same rows via stage_truncate_light.sql
-- and user-hash passes of stage_truncate_pass.sql). {sized} is a stored table or the name of a CTE
-- (stage_with.sql) holding pairs with |W_u| (stage_sized.sql).
-- idents: sized, window
-- params: max_contributions
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM {sized} WHERE _dp_size <= $max_contributions
UNION ALL
{window}
