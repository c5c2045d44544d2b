-- rendering 1 of 2; binds none
SELECT _dp_k0 AS "item" FROM temp.main."_duckdp_000000000000_key_ids0" WHERE _dp_id IN (SELECT _dp_k0 FROM (SELECT _dp_k0 FROM "_duckdp_000000000000_status3" WHERE _dp_released)) ORDER BY ALL

-- rendering 2 of 2; binds none
SELECT _dp_k0 AS "item" FROM temp.main."_duckdp_000000000000_key_ids0" WHERE _dp_id IN (SELECT _dp_k0 FROM ((SELECT _dp_k0 FROM "_duckdp_000000000000_status3" WHERE _dp_released)
UNION ALL
(SELECT * FROM "_duckdp_000000000000_selected10"))) ORDER BY ALL
