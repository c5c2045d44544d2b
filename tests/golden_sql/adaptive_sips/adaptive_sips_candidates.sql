-- rendering 1 of 2; binds $candidates=70, $trunc_salt=4495534904771661033
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs0" AS p ANTI JOIN "_duckdp_000000000000_state1" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 2 of 2; binds $candidates=73, $trunc_salt=4427371557954821508
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs0" AS p ANTI JOIN "_duckdp_000000000000_state4" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
