-- rendering 1 of 1; binds none
INSERT INTO temp.main."_duckdp_000000000000_status2" BY NAME
SELECT * FROM "_duckdp_000000000000_decided3"
