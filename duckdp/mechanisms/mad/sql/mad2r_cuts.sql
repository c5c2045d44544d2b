-- MAD2R with lazy round-1 noise: the users whose candidates (mad2r_candidates.sql) were cut at
-- $candidates pairs and settled R̃_u (not in {unsettled}, mad2r_unsettled.sql), each with the order of
-- its last candidate `_dp_last`: Δ0 pairs of R_u are ordered before it, so round 2's truncation keeps
-- none ordered after it (mad2r_pruned.sql drops those).
-- idents: candidates, unsettled
-- params: candidates
SELECT _dp_user, max(_dp_order) AS _dp_last
FROM (SELECT c.* FROM {candidates} AS c ANTI JOIN {unsettled} AS u USING (_dp_user)) AS settled
GROUP BY _dp_user HAVING count(*) >= $candidates
