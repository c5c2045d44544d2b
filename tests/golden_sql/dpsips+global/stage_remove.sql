-- rendering 1 of 3; binds none
SELECT p.* FROM (SELECT * FROM "_duckdp_000000000000_pairs0") AS p ANTI JOIN (SELECT * FROM "_duckdp_000000000000_released1") AS r ON p._dp_k0 IS NOT DISTINCT FROM r._dp_k0

-- rendering 2 of 3; binds none
SELECT p.* FROM (SELECT * FROM "_duckdp_000000000000_pairs0") AS p ANTI JOIN (SELECT * FROM "_duckdp_000000000000_released1") AS r ON p._dp_k0 IS NOT DISTINCT FROM r._dp_k0

-- rendering 3 of 3; binds none
SELECT p.* FROM (SELECT * FROM "_duckdp_000000000000_pairs0") AS p ANTI JOIN (SELECT * FROM "_duckdp_000000000000_released1") AS r ON p._dp_k0 IS NOT DISTINCT FROM r._dp_k0
