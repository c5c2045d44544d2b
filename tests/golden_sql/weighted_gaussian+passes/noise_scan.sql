-- rendering 1 of 1; binds $exponent=0.5
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH kept AS (       -- kept (user, key) pairs with d (stage_truncate.sql)
  SELECT * FROM "_duckdp_000000000000_kept1"
)
SELECT _dp_k0, sum(pow(_dp_d, -$exponent)) AS _dp_w FROM kept GROUP BY _dp_k0)
