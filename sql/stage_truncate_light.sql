-- Stage `truncate` in passes, set-up: users within Δ0 keep every pair (as stage_truncate.sql).
-- idents: kept, sized
-- params: max_contributions
CREATE TEMP TABLE {kept} AS
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM {sized} WHERE _dp_size <= $max_contributions
