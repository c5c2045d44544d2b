-- MAD user vectors, unbiased (spec §2 step 1, §4 with β ≡ 1): one row per kept (user, key) with
-- d = kept size and the UserWeights entry w^u_i = 1/√d. Stored (every MAD stage reads it); also
-- Spark SQL (duckdp/mechanisms/mad/spark.py runs it on Spark).
-- idents: kept, keys
-- params:
WITH kept AS (       -- kept pairs with d (stage_truncate.sql)
  {kept}
)
SELECT _dp_user, {keys}, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_uw FROM kept
