-- MAD2R round-2 UserWeights (spec §4) for the users of {target} (mad2r_vectors.sql) with a
-- clipped bias below 1: w_i = min(λ·v_i, cap), cap = β_max/√d. The §4 water-filling loop ends at the
-- λ with ‖w‖ = 1; with the r−1 largest v capped that is λ_r = √((1 − (r−1)cap²)/Σ_{j≥r} v_j²), valid
-- when it caps exactly those (relative slack 1e-9); the smallest valid λ is taken (never a norm
-- above 1). No valid λ happens only for β_max = 1, where every entry sits at cap = 1/√d.
-- idents: target, keys, match
-- params: beta_max
UPDATE {target} AS t SET _dp_uw = s._dp_uw FROM (
  WITH ordered AS (  -- users with a bias below 1, v in decreasing order: rank r, Σ_{j≥r} v_j², and v_{r−1}
    SELECT *,
           row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, {keys}) AS _dp_r,
           sum(_dp_v * _dp_v) OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, {keys}
                                    ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS _dp_tail,
           lag(_dp_v) OVER (PARTITION BY _dp_user ORDER BY _dp_v DESC, {keys}) AS _dp_prev,
           $beta_max / sqrt(_dp_d) AS _dp_cap
    FROM {target} WHERE _dp_biased
  ), candidate AS (  -- λ_r for "the r−1 largest capped"
    SELECT *, CASE WHEN 1 - (_dp_r - 1) * _dp_cap * _dp_cap > 0
                   THEN sqrt((1 - (_dp_r - 1) * _dp_cap * _dp_cap) / _dp_tail) END AS _dp_lam
    FROM ordered
  ), solved AS (     -- λ* = smallest λ_r whose capped set is self-consistent
    SELECT *, min(CASE WHEN _dp_lam * _dp_v <= _dp_cap * (1 + 1e-9)
                        AND (_dp_prev IS NULL OR _dp_lam * _dp_prev >= _dp_cap * (1 - 1e-9))
                       THEN _dp_lam END) OVER (PARTITION BY _dp_user) AS _dp_lambda
    FROM candidate
  )
  -- w^u_i = min(λ*·v_i, cap) (1/√d = cap when β_max = 1 left no valid λ)
  SELECT _dp_user, {keys}, coalesce(least(_dp_lambda * _dp_v, _dp_cap), 1.0 / sqrt(_dp_d)) AS _dp_uw FROM solved
) AS s
WHERE t._dp_user = s._dp_user AND {match}
