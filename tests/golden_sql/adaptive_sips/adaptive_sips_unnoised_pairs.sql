-- rendering 1 of 2; binds $trunc_salt=4495534904771661033
SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM "_duckdp_000000000000_open3" WHERE _dp_level IS NULL) AS unnoised

-- rendering 2 of 2; binds $trunc_salt=4427371557954821508
SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM (SELECT p.* FROM "_duckdp_000000000000_open3" AS p ANTI JOIN "_duckdp_000000000000_state5" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE p._dp_level IS NULL) AS o WHERE _dp_level IS NULL) AS unnoised
