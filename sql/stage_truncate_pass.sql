-- Stage `truncate` in passes, one pass: the users over Δ0 whose (unsalted) user hash falls in part
-- $part of $nparts keep their Δ0 keys of smallest keyed hash, exactly as stage_truncate.sql
-- ({window}: stage_truncate_window.sql over `part`). One window per pass keeps each pass within
-- DuckDB's memory limit (its window operator does not spill).
-- idents: kept, sized, window
-- params: nparts, part
INSERT INTO {kept}
WITH part AS (       -- this pass's users (DuckDB inlines a CTE read once: a filtered scan)
  SELECT * FROM {sized} WHERE hash(_dp_user) % $nparts = $part
)
{window}
