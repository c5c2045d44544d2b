-- rendering 1 of 2; binds $beta_min=0.5
UPDATE "_duckdp_000000000000_vectors213" AS t SET _dp_v = s._dp_v, _dp_uw = s._dp_uw, _dp_biased = s._dp_biased FROM (
  SELECT _dp_user, _dp_k0, _dp_d, _dp_b / sqrt(_dp_d) AS _dp_v, _dp_uw, true AS _dp_biased
FROM "_duckdp_000000000000_vectors213" AS v JOIN (
  SELECT _dp_k0, greatest(least(_dp_beta, 1.0), $beta_min) AS _dp_b FROM "_duckdp_000000000000_status4" WHERE _dp_round2
) AS s USING (_dp_k0)
WHERE _dp_b < 1
) AS s
WHERE t._dp_user = s._dp_user AND t._dp_k0 IS NOT DISTINCT FROM s._dp_k0

-- rendering 2 of 2; binds $beta_max=1.2
UPDATE "_duckdp_000000000000_vectors213" AS t SET _dp_v = s._dp_v, _dp_uw = s._dp_uw, _dp_biased = s._dp_biased FROM (
  WITH ordered AS (    -- users with a bias below 1, v in decreasing order: rank r, Σ_{j≥r} v_j², and v_{r−1}
  SELECT *,
         row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, _dp_k0) AS _dp_r,
         sum(_dp_v * _dp_v) OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, _dp_k0
                                  ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS _dp_tail,
         lag(_dp_v) OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, _dp_k0) AS _dp_prev,
         $beta_max / sqrt(_dp_d) AS _dp_cap
  FROM "_duckdp_000000000000_vectors213" WHERE _dp_user IN (SELECT _dp_user FROM "_duckdp_000000000000_vectors213" WHERE _dp_biased)
), candidate AS (    -- λ_r for "the r−1 largest capped"
  SELECT *, CASE WHEN 1 - (_dp_r - 1) * _dp_cap * _dp_cap > 0
                 THEN sqrt((1 - (_dp_r - 1) * _dp_cap * _dp_cap) / _dp_tail) END AS _dp_lam
  FROM ordered
), solved AS (       -- λ* = smallest λ_r whose capped set is self-consistent
  SELECT *, min(CASE WHEN _dp_lam * _dp_v <= _dp_cap * (1 + 1e-9)
                      AND (_dp_prev IS NULL OR _dp_lam * _dp_prev >= _dp_cap * (1 - 1e-9))
                     THEN _dp_lam END) OVER (PARTITION BY _dp_user) AS _dp_lambda
  FROM candidate
)
SELECT _dp_user, _dp_k0, _dp_d, _dp_v, coalesce(least(_dp_lambda * _dp_v, _dp_cap), 1.0 / sqrt(_dp_d)) AS _dp_uw,
       true AS _dp_biased
FROM solved
) AS s
WHERE t._dp_user = s._dp_user AND t._dp_k0 IS NOT DISTINCT FROM s._dp_k0
