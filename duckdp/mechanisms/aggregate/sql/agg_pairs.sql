-- Private GROUP BY stage 2's input: the distinct (user, key) pairs of the restricted rows {rows}
-- (agg_rows.sql), bounded to Δ0 keys per user by the shared truncation (stage_sized, stage_truncate).
-- idents: rows, keys
-- params:
SELECT DISTINCT _dp_user, {keys} FROM ({rows}) AS r
