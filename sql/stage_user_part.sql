-- Stage `truncate` in passes, the user split: the users whose (unsalted) user hash falls in part $part
-- of $nparts. The one place it is written: stage_truncate_pass.sql filters each pass by it, and
-- DuckDBStages.store_by_user_part splits other per-user windows (a mechanism's own) the same way.
-- A filter on `_dp_user`, filled into a template's hole after its FROM.
-- idents:
-- params: nparts, part
WHERE hash(_dp_user) % $nparts = $part
