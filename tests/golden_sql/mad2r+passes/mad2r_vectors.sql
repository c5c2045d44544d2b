-- rendering 1 of 1; binds none
WITH kept AS (       -- kept round-2 pairs with d
  SELECT * FROM "_duckdp_000000000000_kept11"
)
SELECT _dp_user, _dp_k0, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_v, 1.0 / sqrt(_dp_d) AS _dp_uw, false AS _dp_biased
FROM kept
