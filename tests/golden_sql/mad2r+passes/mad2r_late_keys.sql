-- rendering 1 of 1; binds none
SELECT DISTINCT _dp_k0, NULL::DOUBLE AS _dp_w
FROM (SELECT p.* FROM "_duckdp_000000000000_candidates6" AS p ANTI JOIN "_duckdp_000000000000_vectors3" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS late
