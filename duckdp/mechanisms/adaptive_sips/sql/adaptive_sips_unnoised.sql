-- Adaptive SIPS with lazy noise: the candidate keys (adaptive_sips_candidates.sql) that no round has
-- noised yet (no row in {state}), once each, with their PRF counters (duckdp/counters.py): their
-- earlier rounds' noise is drawn now (duckdp/mechanisms/adaptive_sips/duckdb.py, `noise_late`).
-- idents: candidates, state, match, keys, counter_hi, counter_lo
-- params:
SELECT DISTINCT {keys}, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo
FROM (SELECT c.* FROM {candidates} AS c ANTI JOIN {state} AS s ON {match}) AS unnoised
