-- rendering 1 of 2; binds none
SELECT DISTINCT _dp_k0, -(_dp_k0 < 0)::BIGINT AS _dp_chi, _dp_k0::BIGINT AS _dp_clo
FROM (SELECT c.* FROM "_duckdp_000000000000_candidates4" AS c ANTI JOIN "_duckdp_000000000000_state1" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised

-- rendering 2 of 2; binds none
SELECT DISTINCT _dp_k0, -(_dp_k0 < 0)::BIGINT AS _dp_chi, _dp_k0::BIGINT AS _dp_clo
FROM (SELECT c.* FROM "_duckdp_000000000000_candidates7" AS c ANTI JOIN "_duckdp_000000000000_state5" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
