-- rendering 1 of 2; binds none
INSERT INTO temp.main."_duckdp_000000000000_status4" BY NAME
SELECT * FROM "_duckdp_000000000000_decided5"

-- rendering 2 of 2; binds none
INSERT INTO temp.main."_duckdp_000000000000_status4" BY NAME
SELECT * FROM "_duckdp_000000000000_decided7"
