-- MAD2R with lazy round-1 noise, a heavy user's candidates (duckdp/mechanisms/mad/duckdb.py, `noise_late`):
-- the stored pairs that mad2r_candidates.sql ranks, every pair of a user with at most $heavy pairs
-- (`_dp_size`), and of a heavier one the pairs whose order in round 2's truncation ({order}: its keyed hash,
-- DuckDBStages.truncation_order, under the salt the candidates bind too) lies below a bound that about
-- $prefix of its `_dp_size` pairs lie below (the hash is uniform on [0, 2⁶⁴)). The comparison is on the
-- DOUBLE of the hash, a non-decreasing function of it, so the pairs kept are a prefix of the user's order
-- (tied pairs together). A user whose prefix holds fewer than the candidate limit of pairs not noised gets
-- the full ranking instead (mad2r_short.sql, mad2r_unprefix.sql). Two scans joined by UNION ALL rather than
-- one scan under `_dp_size <= $heavy OR …`: with the OR, DuckDB's estimate of the filtered pairs fell below
-- the support's rows and it built the candidates' anti-join on the pairs (RIGHT_ANTI, probed by the support:
-- 0.45 vs 0.33 CPU s on 2M pairs + one 2M-key user; the UNION ALL: 0.21, benchmarks/RESULTS.md stop 32).
-- idents: pairs, order
-- params: heavy, prefix
(SELECT * FROM {pairs} WHERE _dp_size <= $heavy
 UNION ALL
 SELECT * FROM {pairs}
 WHERE _dp_size > $heavy AND ({order})::DOUBLE < $prefix::DOUBLE / _dp_size * 18446744073709551616.0)
