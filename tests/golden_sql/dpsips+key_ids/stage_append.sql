-- rendering 1 of 2; binds none
INSERT INTO "_duckdp_000000000000_released2"
SELECT * FROM "_duckdp_000000000000_selected3"

-- rendering 2 of 2; binds none
INSERT INTO "_duckdp_000000000000_released2"
SELECT * FROM "_duckdp_000000000000_selected4"
