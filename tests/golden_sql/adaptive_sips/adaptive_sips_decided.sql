-- rendering 1 of 2; binds $round=0
INSERT INTO "_duckdp_000000000000_state1" BY NAME
SELECT _dp_k0, _dp_level, CASE WHEN _dp_released THEN $round::INTEGER END AS _dp_round FROM "_duckdp_000000000000_decided2"

-- rendering 2 of 2; binds $round=1
INSERT INTO "_duckdp_000000000000_state5" BY NAME
SELECT _dp_k0, _dp_level, CASE WHEN _dp_released THEN $round::INTEGER END AS _dp_round FROM "_duckdp_000000000000_decided6"
