-- rendering 1 of 1; binds none
(SELECT * FROM "_duckdp_000000000000_released1")
UNION ALL
(SELECT * FROM "_duckdp_000000000000_selected4")
