-- rendering 1 of 2; binds $candidates=69, $nparts=2, $part=0, $trunc_salt=4495534904771661033
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
  FROM (SELECT p.* FROM "_duckdp_000000000000_pairs0" AS p ANTI JOIN "_duckdp_000000000000_vectors3" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 2 of 2; binds $candidates=69, $nparts=2, $part=1, $trunc_salt=4495534904771661033
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
  FROM (SELECT p.* FROM "_duckdp_000000000000_pairs0" AS p ANTI JOIN "_duckdp_000000000000_vectors3" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
