-- rendering 1 of 1; binds none
SELECT _dp_k0 AS "item" FROM (SELECT * FROM "_duckdp_000000000000_selected3") ORDER BY ALL
