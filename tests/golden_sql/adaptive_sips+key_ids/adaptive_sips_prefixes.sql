-- rendering 1 of 1; binds $trunc_salt_0=4495534904771661033, $trunc_salt_1=4427371557954821508
SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p LEFT JOIN "_duckdp_000000000000_heavy4" AS h USING (_dp_user) WHERE h._dp_b0 IS NULL OR (hash(xor(hash(_dp_user, _dp_k0), $trunc_salt_0)))::DOUBLE < h._dp_b0 OR (hash(xor(hash(_dp_user, _dp_k0), $trunc_salt_1)))::DOUBLE < h._dp_b1
