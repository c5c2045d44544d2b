-- rendering 1 of 1; binds none
CREATE TEMP TABLE "_duckdp_000000000000_released1" AS SELECT _dp_k0 FROM (SELECT * FROM "_duckdp_000000000000_pairs0") LIMIT 0
