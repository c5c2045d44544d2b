-- rendering 1 of 1; binds none
SELECT p.* EXCLUDE (_dp_level), s._dp_level FROM "_duckdp_000000000000_open3" AS p JOIN "_duckdp_000000000000_state5" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE s._dp_level > 0
