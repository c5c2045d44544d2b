-- Stage `truncate` in passes, the user split: the users whose (unsalted) user hash falls in part $part
-- of $nparts. The one place it is written: stage_truncate_pass.sql filters each pass by it, and
-- DuckDBStages.store_by_user_part splits other per-user windows (a mechanism's own) the same way.
-- A filter on `_dp_user`, filled into a template's hole after its FROM. The casts keep the modulo in 64 bits: an
-- integer parameter would widen hash() to HUGEINT, ~75× the CPU (9.2 vs 0.12 s over 30M rows, 16 threads).
-- idents:
-- params: nparts, part
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT
