-- rendering 1 of 1; binds none
WITH kept AS (       -- kept pairs with d (stage_truncate.sql)
  SELECT * FROM "_duckdp_000000000000_kept1"
)
SELECT _dp_user, _dp_k0, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_uw FROM kept
