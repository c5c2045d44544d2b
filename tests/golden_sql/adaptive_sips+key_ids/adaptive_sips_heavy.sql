-- rendering 1 of 1; binds $heavy=286, $prefix_0=70, $prefix_1=73
SELECT _dp_user, $prefix_0::DOUBLE / count(*) * 18446744073709551616.0 AS _dp_b0, $prefix_1::DOUBLE / count(*) * 18446744073709551616.0 AS _dp_b1 FROM "_duckdp_000000000000_pairs1" GROUP BY _dp_user HAVING count(*) > $heavy
