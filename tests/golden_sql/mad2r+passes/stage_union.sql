-- rendering 1 of 1; binds none
(SELECT _dp_k0 FROM "_duckdp_000000000000_status4" WHERE _dp_released)
UNION ALL
(SELECT * FROM "_duckdp_000000000000_selected14")
