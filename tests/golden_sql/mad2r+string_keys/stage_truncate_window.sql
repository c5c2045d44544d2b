-- rendering 1 of 2; binds $max_contributions=2, $trunc_salt=4041988694836402461
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM _dp_fallback WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)), _dp_k0)) <= $max_contributions

-- rendering 2 of 2; binds $max_contributions=2, $trunc_salt=4495534904771661033
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM _dp_fallback WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)), _dp_k0)) <= $max_contributions
