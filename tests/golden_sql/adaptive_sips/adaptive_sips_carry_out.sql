-- rendering 1 of 1; binds none
INSERT INTO "_duckdp_000000000000_state4" SELECT _dp_k0, _dp_level, _dp_round FROM "_duckdp_000000000000_state1" WHERE _dp_level = 0
