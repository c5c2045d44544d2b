-- rendering 1 of 2; binds $max_contributions=2, $nparts=2, $part=0, $trunc_salt=4041988694836402461
INSERT INTO "_duckdp_000000000000_kept1"
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE FROM "_duckdp_000000000000_sized0"
WHERE _dp_size > $max_contributions AND hash(_dp_user) % $nparts = $part
QUALIFY row_number() OVER (PARTITION BY _dp_user
                           ORDER BY hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))) <= $max_contributions

-- rendering 2 of 2; binds $max_contributions=2, $nparts=2, $part=1, $trunc_salt=4041988694836402461
INSERT INTO "_duckdp_000000000000_kept1"
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE FROM "_duckdp_000000000000_sized0"
WHERE _dp_size > $max_contributions AND hash(_dp_user) % $nparts = $part
QUALIFY row_number() OVER (PARTITION BY _dp_user
                           ORDER BY hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))) <= $max_contributions
