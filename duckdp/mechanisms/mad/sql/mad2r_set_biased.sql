-- MAD2R round 2 on DuckDB: the biased users' entries w_i (mad2r_biased.sql over {target}) and their
-- user flag `_dp_biased` written over the stored vectors (mad2r_vectors.sql), in place: only those
-- users' rows are touched.
-- idents: target, biased, match
-- params:
UPDATE {target} AS t SET _dp_uw = s._dp_uw, _dp_biased = s._dp_biased FROM (
  {biased}
) AS s
WHERE t._dp_user = s._dp_user AND {match}
