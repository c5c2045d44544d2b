-- rendering 1 of 2; binds none
SELECT p.* EXCLUDE (_dp_level), s._dp_level FROM "_duckdp_000000000000_open4" AS p JOIN "_duckdp_000000000000_state6" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE s._dp_level > 0

-- rendering 2 of 2; binds none
SELECT p.* EXCLUDE (_dp_level), s._dp_level FROM (SELECT * FROM "_duckdp_000000000000_open4" LIMIT 0) AS p JOIN "_duckdp_000000000000_state6" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE s._dp_level > 0
