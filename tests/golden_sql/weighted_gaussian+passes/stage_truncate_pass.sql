-- rendering 1 of 2; binds $max_contributions=2, $nparts=2, $part=0, $trunc_salt=4041988694836402461
INSERT INTO "_duckdp_000000000000_kept1"
WITH part AS (       -- this pass's users (DuckDB inlines a CTE read once: a filtered scan)
  SELECT * FROM "_duckdp_000000000000_over2" WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT
)
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM part WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions

-- rendering 2 of 2; binds $max_contributions=2, $nparts=2, $part=1, $trunc_salt=4041988694836402461
INSERT INTO "_duckdp_000000000000_kept1"
WITH part AS (       -- this pass's users (DuckDB inlines a CTE read once: a filtered scan)
  SELECT * FROM "_duckdp_000000000000_over2" WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT
)
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM part WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
