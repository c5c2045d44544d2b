-- Stage `truncate` in passes, one pass: the users over Δ0 whose (unsalted) user hash falls in part
-- $part of $nparts keep their Δ0 keys of smallest keyed hash, exactly as stage_truncate.sql. One
-- window per pass keeps each pass within DuckDB's memory limit (its window operator does not spill).
-- idents: kept, sized, keys
-- params: max_contributions, trunc_salt, nparts, part
INSERT INTO {kept}
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE FROM {sized}
WHERE _dp_size > $max_contributions AND hash(_dp_user) % $nparts = $part
QUALIFY row_number() OVER (PARTITION BY _dp_user
                           ORDER BY hash(xor(hash(_dp_user, {keys}), $trunc_salt))) <= $max_contributions
