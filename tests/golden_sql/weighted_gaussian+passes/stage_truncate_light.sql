-- rendering 1 of 1; binds $max_contributions=2
CREATE TEMP TABLE "_duckdp_000000000000_kept1" AS
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM "_duckdp_000000000000_sized0" WHERE _dp_size <= $max_contributions
