-- rendering 1 of 1; binds $beta_min=0.5
SELECT _dp_user, _dp_k0, _dp_d, _dp_b / sqrt(_dp_d) AS _dp_v, _dp_uw, true AS _dp_biased
FROM "_duckdp_000000000000_vectors213" AS v JOIN (
  SELECT _dp_k0, greatest(least(_dp_beta, 1.0), $beta_min) AS _dp_b FROM "_duckdp_000000000000_status4" WHERE _dp_round2
) AS s USING (_dp_k0)
WHERE _dp_b < 1
