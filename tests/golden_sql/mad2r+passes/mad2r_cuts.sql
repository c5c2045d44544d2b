-- rendering 1 of 1; binds $candidates=69
SELECT _dp_user, max(_dp_order) AS _dp_last
FROM (SELECT c.* FROM "_duckdp_000000000000_candidates6" AS c ANTI JOIN "_duckdp_000000000000_unsettled8" AS u USING (_dp_user)) AS settled
GROUP BY _dp_user HAVING count(*) >= $candidates
