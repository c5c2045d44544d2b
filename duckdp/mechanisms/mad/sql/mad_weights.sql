-- MAD weighting (spec §5, paper Alg. 3) over materialised user vectors: one row per key.
-- {bounded} holds (_dp_user, keys, _dp_d = d_u, _dp_uw = w^u_i); adaptive users (A) have
-- Δ_min ≤ d_u ≤ Δ_max. Stage 4's w_i = min(ŵ_i, τ) + Σ_{u∈A} (f·e_u·w^u_i + (1 − 1/√d_u)·w^u_i)
-- + Σ_{u∉A} w^u_i is summed as Σ_u m_u·w^u_i − (ŵ_i − τ)⁺ with m_u = 1 + f·e_u on A (1 elsewhere):
-- ŵ_i = Σ_{u∈A} w^u_i/√d_u, so an adaptive row's w^u_i/√d_u + (1 − 1/√d_u)·w^u_i is w^u_i. The same
-- weights (up to float rounding) with one sum per grouped pass and no per-row CASE.
-- idents: bounded, keys
-- params: min_degree, max_degree, tau, reroute
WITH initial AS (    -- stage 1: ŵ_i = Σ_{u∈A} w^u_i/√d_u (per-item sums of the initial weight)
  SELECT {keys}, sum(_dp_uw / sqrt(_dp_d)) AS _dp_init
  FROM {bounded} WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY {keys}
), truncated AS (    -- stage 2: items above τ are cut to τ; ρ_i = (ŵ_i − τ)/ŵ_i (0 elsewhere, not stored)
  SELECT {keys}, (_dp_init - $tau) / _dp_init AS _dp_ratio, _dp_init - $tau AS _dp_cut
  FROM initial WHERE _dp_init > $tau
), excess AS (       -- stage 3: e_u = Σ_i ρ_i w^u_i/√d_u, returned in proportion to contribution: m_u = 1 + f·e_u
  SELECT _dp_user, 1 + $reroute * sum(_dp_ratio * _dp_uw / sqrt(_dp_d)) AS _dp_m
  FROM {bounded} JOIN truncated USING ({keys})
  WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_user
), summed AS (       -- stage 4 before the cut: Σ_u m_u·w^u_i (m_u = 1 for users without excess)
  SELECT {keys}, sum(_dp_uw * coalesce(_dp_m, 1)) AS _dp_s
  FROM {bounded} LEFT JOIN excess USING (_dp_user) GROUP BY {keys}
)
-- stage 4: w_i = Σ_u m_u·w^u_i − (ŵ_i − τ) on the truncated items
SELECT {keys}, _dp_s - coalesce(_dp_cut, 0) AS _dp_w FROM summed LEFT JOIN truncated USING ({keys})
