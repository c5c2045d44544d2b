-- rendering 1 of 2; binds none
SELECT * FROM "_duckdp_000000000000_open4" WHERE _dp_level > 0
UNION ALL
SELECT o.* EXCLUDE (_dp_level), s._dp_level FROM "_duckdp_000000000000_open4" AS o JOIN "_duckdp_000000000000_state2" AS s ON o._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE o._dp_level IS NULL AND s._dp_level > 0

-- rendering 2 of 2; binds none
SELECT * FROM "_duckdp_000000000000_open9" WHERE _dp_level > 0
UNION ALL
SELECT o.* EXCLUDE (_dp_level), s._dp_level FROM "_duckdp_000000000000_open9" AS o JOIN "_duckdp_000000000000_state7" AS s ON o._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE o._dp_level IS NULL AND s._dp_level > 0
