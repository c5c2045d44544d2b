-- rendering 1 of 1; binds $trunc_salt=4495534904771661033
SELECT _dp_user, _dp_k0
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs0" AS p LEFT JOIN "_duckdp_000000000000_cuts9" AS c USING (_dp_user)
WHERE c._dp_last IS NULL OR hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) <= c._dp_last) AS p
ANTI JOIN (SELECT _dp_k0 FROM "_duckdp_000000000000_status4" WHERE _dp_round2 = false) AS out USING (_dp_k0)
