-- MAD2R round-2 user vectors on Spark in one statement (spec §6 step c, §4 UserWeights): the rows of
-- mad2r_vectors.sql with the kept pairs' biases of mad2r_kept_biases.sql already in place, as DuckDB
-- has them after writing those in place (mad2r_set_biased.sql): one row per kept (user, key) of
-- mad2r_remaining.sql re-cut to Δ0, v_i = b_i/√d for a key with b_i = clip(β_i, β_min, 1) < 1 in
-- {status} (a row left for round 2 with `_dp_round2`; `_dp_biased`: this kept pair's b_i < 1) and
-- v_i = 1/√d for the others (β = 1), the entry w^u_i = 1/√d. The biases are a function of the key,
-- joined to the kept pairs after the truncation (its per-user top-Δ0 carries no bias column) by one
-- left join on the few biased status rows, so no intermediate frame is stored and nothing is put in
-- place by a second join. The biased users' rows are then recomputed by mad2r_biased.sql.
-- idents: kept, keys, status
-- params: beta_min
WITH kept AS (       -- kept round-2 pairs with d
  {kept}
), biases AS (       -- the keys left for round 2 with a clipped bias b_i < 1
  SELECT {keys}, _dp_b FROM (
    SELECT {keys}, greatest(least(_dp_beta, 1.0), $beta_min) AS _dp_b FROM {status} WHERE _dp_round2
  ) AS s
  WHERE _dp_b < 1
)
SELECT _dp_user, {keys}, _dp_d, coalesce(_dp_b, 1.0) / sqrt(_dp_d) AS _dp_v, 1.0 / sqrt(_dp_d) AS _dp_uw,
       _dp_b IS NOT NULL AS _dp_biased
FROM kept LEFT JOIN biases USING ({keys})
