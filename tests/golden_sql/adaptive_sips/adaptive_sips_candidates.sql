-- rendering 1 of 2; binds $candidates=70, $trunc_salt=4495534904771661033
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM "_duckdp_000000000000_open3" WHERE _dp_level IS NULL) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 2 of 2; binds $candidates=73, $trunc_salt=4427371557954821508
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM "_duckdp_000000000000_open7" WHERE _dp_level IS NULL) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
