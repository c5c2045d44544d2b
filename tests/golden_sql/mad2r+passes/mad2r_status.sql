-- rendering 1 of 1; binds $max_degree=2, $min_degree=2, $reroute=0.45710678118654746, $tau=99.29215355508413
CREATE TEMP TABLE "_duckdp_000000000000_status4" AS
SELECT _dp_k0, NULL::BOOLEAN AS _dp_released, NULL::BOOLEAN AS _dp_round2, NULL::DOUBLE AS _dp_beta
FROM (WITH initial AS (    -- stage 1: ŵ_i = Σ_{u∈A} w^u_i/√d_u (per-item sums of the initial weight)
  SELECT _dp_k0, sum(_dp_uw / sqrt(_dp_d)) AS _dp_init
  FROM "_duckdp_000000000000_vectors3" WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_k0
), truncated AS (    -- stage 2: items above τ are cut to τ; ρ_i = (ŵ_i − τ)/ŵ_i (0 elsewhere, not stored)
  SELECT _dp_k0, (_dp_init - $tau) / _dp_init AS _dp_ratio, _dp_init - $tau AS _dp_cut
  FROM initial WHERE _dp_init > $tau
), excess AS (       -- stage 3: e_u = Σ_i ρ_i w^u_i/√d_u, returned in proportion to contribution: m_u = 1 + f·e_u
  SELECT _dp_user, 1 + $reroute * sum(_dp_ratio * _dp_uw / sqrt(_dp_d)) AS _dp_m
  FROM "_duckdp_000000000000_vectors3" JOIN truncated USING (_dp_k0)
  WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_user
), summed AS (       -- stage 4 before the cut: Σ_u m_u·w^u_i (m_u = 1 for users without excess)
  SELECT _dp_k0, sum(_dp_uw * coalesce(_dp_m, 1)) AS _dp_s
  FROM "_duckdp_000000000000_vectors3" LEFT JOIN excess USING (_dp_user) GROUP BY _dp_k0
)
SELECT _dp_k0, _dp_s - coalesce(_dp_cut, 0) AS _dp_w FROM summed LEFT JOIN truncated USING (_dp_k0)) LIMIT 0
