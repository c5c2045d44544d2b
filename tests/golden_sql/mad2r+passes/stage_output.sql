-- rendering 1 of 2; binds none
SELECT _dp_k0 AS "item" FROM (SELECT _dp_k0 FROM "_duckdp_000000000000_status4" WHERE _dp_released) ORDER BY ALL

-- rendering 2 of 2; binds none
SELECT _dp_k0 AS "item" FROM ((SELECT _dp_k0 FROM "_duckdp_000000000000_status4" WHERE _dp_released)
UNION ALL
(SELECT * FROM "_duckdp_000000000000_selected14")) ORDER BY ALL
