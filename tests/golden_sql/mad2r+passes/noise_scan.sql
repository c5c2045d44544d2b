-- rendering 1 of 3; binds $max_degree=2, $min_degree=2, $reroute=0.45710678118654746, $tau=99.29215355508413
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
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
SELECT _dp_k0, _dp_s - coalesce(_dp_cut, 0) AS _dp_w FROM summed LEFT JOIN truncated USING (_dp_k0))

-- rendering 2 of 3; binds none
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (SELECT DISTINCT _dp_k0, NULL::DOUBLE AS _dp_w
FROM (SELECT p.* FROM "_duckdp_000000000000_candidates6" AS p ANTI JOIN "_duckdp_000000000000_vectors3" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS late)

-- rendering 3 of 3; binds $max_degree=2, $min_degree=2, $reroute=0.22855339059327373, $tau=31.910910593711478
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH initial AS (    -- stage 1: ŵ_i = Σ_{u∈A} w^u_i/√d_u (per-item sums of the initial weight)
  SELECT _dp_k0, sum(_dp_uw / sqrt(_dp_d)) AS _dp_init
  FROM "_duckdp_000000000000_vectors213" WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_k0
), truncated AS (    -- stage 2: items above τ are cut to τ; ρ_i = (ŵ_i − τ)/ŵ_i (0 elsewhere, not stored)
  SELECT _dp_k0, (_dp_init - $tau) / _dp_init AS _dp_ratio, _dp_init - $tau AS _dp_cut
  FROM initial WHERE _dp_init > $tau
), excess AS (       -- stage 3: e_u = Σ_i ρ_i w^u_i/√d_u, returned in proportion to contribution: m_u = 1 + f·e_u
  SELECT _dp_user, 1 + $reroute * sum(_dp_ratio * _dp_uw / sqrt(_dp_d)) AS _dp_m
  FROM "_duckdp_000000000000_vectors213" JOIN truncated USING (_dp_k0)
  WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_user
), summed AS (       -- stage 4 before the cut: Σ_u m_u·w^u_i (m_u = 1 for users without excess)
  SELECT _dp_k0, sum(_dp_uw * coalesce(_dp_m, 1)) AS _dp_s
  FROM "_duckdp_000000000000_vectors213" LEFT JOIN excess USING (_dp_user) GROUP BY _dp_k0
)
SELECT _dp_k0, _dp_s - coalesce(_dp_cut, 0) AS _dp_w FROM summed LEFT JOIN truncated USING (_dp_k0))
