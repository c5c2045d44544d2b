-- rendering 1 of 1; binds none
SELECT * FROM "_duckdp_000000000000_open3" WHERE _dp_level > 0
UNION ALL
SELECT c.* EXCLUDE (_dp_order, _dp_cut), s._dp_level FROM "_duckdp_000000000000_candidates4" AS c JOIN "_duckdp_000000000000_state1" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE s._dp_level > 0
