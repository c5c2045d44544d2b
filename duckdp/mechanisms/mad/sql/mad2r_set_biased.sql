-- MAD2R round 2 on DuckDB: rows of {biased} written over the stored vectors (mad2r_vectors.sql) in place
-- (only those rows are touched, and the table keeps its row order): first the kept pairs with a bias
-- (mad2r_kept_biases.sql: v_i and the pair's flag), then the biased users' entries w_i and their user flag
-- `_dp_biased` (mad2r_biased.sql over {target}).
-- idents: target, biased, match
-- params:
UPDATE {target} AS t SET _dp_v = s._dp_v, _dp_uw = s._dp_uw, _dp_biased = s._dp_biased FROM (
  {biased}
) AS s
WHERE t._dp_user = s._dp_user AND {match}
