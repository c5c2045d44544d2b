-- rendering 1 of 1; binds none
SELECT _dp_user, _dp_k0
FROM "_duckdp_000000000000_pairs0" AS p
ANTI JOIN (SELECT _dp_k0 FROM "_duckdp_000000000000_status2" WHERE _dp_round2 = false) AS out USING (_dp_k0)
