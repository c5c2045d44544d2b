-- rendering 1 of 1; binds $heavy=9152, $prefix_0=70, $prefix_1=73
SELECT _dp_user, _dp_n, $prefix_0::DOUBLE / _dp_n * 18446744073709551616.0 AS _dp_b0, $prefix_1::DOUBLE / _dp_n * 18446744073709551616.0 AS _dp_b1
FROM (SELECT p._dp_user, 16 * count(*) AS _dp_n
      FROM (SELECT * FROM "_duckdp_000000000000_pairs0" WHERE hash(_dp_user, _dp_k0) < 1152921504606846976) AS p
      LEFT JOIN "_duckdp_000000000000_state1" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0
      WHERE s._dp_level IS NULL OR s._dp_level > 0
      GROUP BY p._dp_user HAVING 16 * count(*) > $heavy) AS n
