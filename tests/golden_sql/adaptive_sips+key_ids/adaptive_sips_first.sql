-- rendering 1 of 1; binds none
SELECT *, 1.0::DOUBLE AS _dp_level FROM "_duckdp_000000000000_pairs1"
