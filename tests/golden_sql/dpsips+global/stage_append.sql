-- rendering 1 of 2; binds none
INSERT INTO "_duckdp_000000000000_released1"
SELECT * FROM "_duckdp_000000000000_selected2"

-- rendering 2 of 2; binds none
INSERT INTO "_duckdp_000000000000_released1"
SELECT * FROM "_duckdp_000000000000_selected3"
