-- MAD2R round-2 UserWeights (spec §4) for the users of {vectors} (mad2r_vectors.sql) with a
-- kept clipped bias below 1 (a row with `_dp_biased`): all of their rows, each with w_i = min(λ·v_i, cap),
-- cap = β_max/√d, and `_dp_biased` true (the user's flag). The §4 water-filling
-- loop ends at the λ with ‖w‖ = 1; with the r−1 largest v capped that is
-- λ_r = √((1 − (r−1)cap²)/Σ_{j≥r} v_j²), valid when it caps exactly those (relative slack 1e-9); the
-- smallest valid λ is taken (never a norm above 1). No valid λ happens only for β_max = 1, where
-- every entry sits at cap = 1/√d. Also Spark SQL: DuckDB writes these rows over the stored vectors
-- (mad2r_set_biased.sql), Spark unions them with the unbiased users' (duckdp/mechanisms/mad/spark.py).
-- idents: vectors, keys
-- params: beta_max
WITH ordered AS (    -- users with a bias below 1, v in decreasing order: rank r, Σ_{j≥r} v_j², and v_{r−1}
  SELECT *,
         row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, {keys}) AS _dp_r,
         sum(_dp_v * _dp_v) OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, {keys}
                                  ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS _dp_tail,
         lag(_dp_v) OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, {keys}) AS _dp_prev,
         $beta_max / sqrt(_dp_d) AS _dp_cap
  FROM {vectors} WHERE _dp_user IN (SELECT _dp_user FROM {vectors} WHERE _dp_biased)
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
-- w^u_i = min(λ*·v_i, cap) (1/√d = cap when β_max = 1 left no valid λ)
SELECT _dp_user, {keys}, _dp_d, _dp_v, coalesce(least(_dp_lambda * _dp_v, _dp_cap), 1.0 / sqrt(_dp_d)) AS _dp_uw,
       true AS _dp_biased
FROM solved
