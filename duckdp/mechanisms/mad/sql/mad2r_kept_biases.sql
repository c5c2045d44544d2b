-- MAD2R round 2 (spec §6 step c, §4): the kept pairs of {vectors} (mad2r_vectors.sql) whose key has a
-- bias β_i < 1 in {status} (the screen's rows left for round 2 with `_dp_round2`; other keys have β = 1),
-- with b_i = clip(β_i, β_min, 1) < 1, v_i = b_i/√d, the entry w^u_i still 1/√d, and `_dp_biased` (this kept
-- pair's b_i < 1). DuckDB writes them over the stored vectors in place
-- (mad2r_set_biased.sql: the rows keep their order); Spark computes the same rows in one statement
-- (mad2r_vectors_biased.sql).
-- idents: vectors, keys, status
-- params: beta_min
SELECT _dp_user, {keys}, _dp_d, _dp_b / sqrt(_dp_d) AS _dp_v, _dp_uw, true AS _dp_biased
FROM {vectors} AS v JOIN (
  SELECT {keys}, greatest(least(_dp_beta, 1.0), $beta_min) AS _dp_b FROM {status} WHERE _dp_round2
) AS s USING ({keys})
WHERE _dp_b < 1
