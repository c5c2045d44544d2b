-- Stage `truncate` in passes, set-up: the pairs of the users over Δ0, the only ones a pass's window reads. Stored
-- once, so each pass scans them alone rather than every pair (10M rows, 200 MB, 16 threads: 46 % of the pairs).
-- idents: over, sized
-- params: max_contributions
CREATE TEMP TABLE {over} AS
SELECT * FROM {sized} WHERE _dp_size > $max_contributions
