-- Stage `truncate` in passes, one pass: the users over Δ0 in one part of the user split ({users}:
-- stage_user_part.sql) keep their Δ0 keys of smallest keyed hash, exactly as stage_truncate.sql
-- ({window}: stage_truncate_window.sql over `part`, or stage_truncate_cut.sql: the same pairs). One window per pass keeps each pass within
-- DuckDB's memory limit (its window operator does not spill).
-- idents: kept, sized, users, window
-- params:
INSERT INTO {kept}
WITH part AS (       -- this pass's users (DuckDB inlines a CTE read once: a filtered scan)
  SELECT * FROM {sized} {users}
)
{window}
