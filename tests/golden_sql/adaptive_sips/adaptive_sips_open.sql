-- rendering 1 of 1; binds none
SELECT p.*, s._dp_level FROM "_duckdp_000000000000_pairs0" AS p LEFT JOIN "_duckdp_000000000000_state1" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE s._dp_level IS NULL OR s._dp_level > 0
