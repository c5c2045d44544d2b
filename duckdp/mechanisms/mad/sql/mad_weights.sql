-- MAD weighting (spec §5, paper Alg. 3) over materialised user vectors: one row per key.
-- {bounded} holds (_dp_user, keys, _dp_d = d_u, _dp_uw = w^u_i); adaptive users have
-- Δ_min ≤ d_u ≤ Δ_max. Stage 4 re-derives ŵ_i inside its group-by (t_i = min(ŵ_i, τ)) instead
-- of joining stage 1 back: the same numbers, one join fewer.
-- idents: bounded, keys
-- params: min_degree, max_degree, tau, reroute
WITH initial AS (    -- stage 1: ŵ_i = Σ_{u∈A} w^u_i/√d_u (per-item sums of the initial weight)
  SELECT {keys}, sum(_dp_uw / sqrt(_dp_d)) AS _dp_init
  FROM {bounded} WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY {keys}
), truncated AS (    -- stage 2: items above τ are cut to τ; ρ_i = (ŵ_i − τ)/ŵ_i (0 elsewhere, not stored)
  SELECT {keys}, (_dp_init - $tau) / _dp_init AS _dp_ratio FROM initial WHERE _dp_init > $tau
), excess AS (       -- stage 3: e_u = Σ_i ρ_i w^u_i/√d_u, returned in proportion to contribution
  SELECT _dp_user, sum(_dp_ratio * _dp_uw / sqrt(_dp_d)) AS _dp_e
  FROM {bounded} JOIN truncated USING ({keys})
  WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_user
)
-- stage 4: w_i = t_i + Σ_{u∈A} (f·e_u·w^u_i + (1 − 1/√d_u)·w^u_i) + Σ_{u∉A} w^u_i
SELECT {keys},
       least(coalesce(sum(_dp_uw / sqrt(_dp_d)) FILTER (WHERE _dp_d BETWEEN $min_degree AND $max_degree), 0), $tau)
       + sum(CASE WHEN _dp_d BETWEEN $min_degree AND $max_degree
                  THEN $reroute * coalesce(_dp_e, 0) * _dp_uw + (1 - 1 / sqrt(_dp_d)) * _dp_uw
                  ELSE _dp_uw END) AS _dp_w
FROM {bounded} LEFT JOIN excess USING (_dp_user)
GROUP BY {keys}
