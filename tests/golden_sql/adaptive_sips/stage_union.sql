-- rendering 1 of 1; binds none
(SELECT _dp_k0 FROM "_duckdp_000000000000_state5" WHERE _dp_round IS NOT NULL)
UNION ALL
(SELECT * FROM "_duckdp_000000000000_selected8")
