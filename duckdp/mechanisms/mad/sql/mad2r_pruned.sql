-- MAD2R with lazy round-1 noise, round 2's input (spec §6, "Lazy round 1"): the stored pairs less those
-- of a settled cut user ({cuts}: mad2r_cuts.sql) ordered after its last candidate, in the order of round
-- 2's truncation ({order}: its keyed hash, DuckDBStages.truncation_order). That truncation keeps none of
-- them: Δ0 pairs of R_u come before, and every user keeps at least Δ0 of R_u here, so its kept pairs and
-- d = min(|R_u|, Δ0) are the same.
-- idents: pairs, cuts, order
-- params:
SELECT p.* FROM {pairs} AS p LEFT JOIN {cuts} AS c USING (_dp_user)
WHERE c._dp_last IS NULL OR {order} <= c._dp_last
