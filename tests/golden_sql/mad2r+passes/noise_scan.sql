-- rendering 1 of 3; binds $max_degree=2, $min_degree=2, $reroute=0.45710678118654746, $tau=99.29215355508413
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH initial AS (    -- stage 1: ŵ_i = Σ_{u∈A} w^u_i/√d_u (per-item sums of the initial weight)
  SELECT _dp_k0, sum(_dp_uw / sqrt(_dp_d)) AS _dp_init
  FROM "_duckdp_000000000000_vectors2" WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_k0
), truncated AS (    -- stage 2: items above τ are cut to τ; ρ_i = (ŵ_i − τ)/ŵ_i (0 elsewhere, not stored)
  SELECT _dp_k0, (_dp_init - $tau) / _dp_init AS _dp_ratio FROM initial WHERE _dp_init > $tau
), excess AS (       -- stage 3: e_u = Σ_i ρ_i w^u_i/√d_u, returned in proportion to contribution
  SELECT _dp_user, sum(_dp_ratio * _dp_uw / sqrt(_dp_d)) AS _dp_e
  FROM "_duckdp_000000000000_vectors2" JOIN truncated USING (_dp_k0)
  WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_user
)
SELECT _dp_k0,
       least(coalesce(sum(_dp_uw / sqrt(_dp_d)) FILTER (WHERE _dp_d BETWEEN $min_degree AND $max_degree), 0), $tau)
       + sum(CASE WHEN _dp_d BETWEEN $min_degree AND $max_degree
                  THEN $reroute * coalesce(_dp_e, 0) * _dp_uw + (1 - 1 / sqrt(_dp_d)) * _dp_uw
                  ELSE _dp_uw END) AS _dp_w
FROM "_duckdp_000000000000_vectors2" LEFT JOIN excess USING (_dp_user)
GROUP BY _dp_k0)

-- rendering 2 of 3; binds none
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (SELECT DISTINCT _dp_k0, NULL::DOUBLE AS _dp_w
FROM (SELECT p.* FROM "_duckdp_000000000000_candidates6" AS p ANTI JOIN "_duckdp_000000000000_vectors2" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS late)

-- rendering 3 of 3; binds $max_degree=2, $min_degree=2, $reroute=0.22855339059327373, $tau=31.910910593711478
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH initial AS (    -- stage 1: ŵ_i = Σ_{u∈A} w^u_i/√d_u (per-item sums of the initial weight)
  SELECT _dp_k0, sum(_dp_uw / sqrt(_dp_d)) AS _dp_init
  FROM "_duckdp_000000000000_vectors213" WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_k0
), truncated AS (    -- stage 2: items above τ are cut to τ; ρ_i = (ŵ_i − τ)/ŵ_i (0 elsewhere, not stored)
  SELECT _dp_k0, (_dp_init - $tau) / _dp_init AS _dp_ratio FROM initial WHERE _dp_init > $tau
), excess AS (       -- stage 3: e_u = Σ_i ρ_i w^u_i/√d_u, returned in proportion to contribution
  SELECT _dp_user, sum(_dp_ratio * _dp_uw / sqrt(_dp_d)) AS _dp_e
  FROM "_duckdp_000000000000_vectors213" JOIN truncated USING (_dp_k0)
  WHERE _dp_d BETWEEN $min_degree AND $max_degree GROUP BY _dp_user
)
SELECT _dp_k0,
       least(coalesce(sum(_dp_uw / sqrt(_dp_d)) FILTER (WHERE _dp_d BETWEEN $min_degree AND $max_degree), 0), $tau)
       + sum(CASE WHEN _dp_d BETWEEN $min_degree AND $max_degree
                  THEN $reroute * coalesce(_dp_e, 0) * _dp_uw + (1 - 1 / sqrt(_dp_d)) * _dp_uw
                  ELSE _dp_uw END) AS _dp_w
FROM "_duckdp_000000000000_vectors213" LEFT JOIN excess USING (_dp_user)
GROUP BY _dp_k0)
