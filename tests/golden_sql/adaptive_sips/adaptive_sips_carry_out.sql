-- rendering 1 of 1; binds none
CREATE TEMP TABLE "_duckdp_000000000000_state5" AS SELECT _dp_k0, _dp_level, _dp_round FROM "_duckdp_000000000000_state1" WHERE _dp_level = 0
