-- MAD2R round-2 user vectors (spec §6 step c, §4 UserWeights): one row per kept (user, key) of
-- mad2r_remaining.sql, re-cut to Δ0 with a fresh salt (stage_truncate.sql), with `_dp_biased`: this KEPT
-- pair's b_i < 1 (§4: UserWeights reads the biases of its set S, the kept pairs only, so keys the
-- truncation dropped play no part; a user is biased when any of its rows is). Each row gets v_i = b_i/√d
-- and the entry w^u_i = 1/√d: the UserWeights vector of a user with no b_i < 1 (§4, unbiased case: v has
-- norm 1 and no entry above cap = β_max/√d ≥ 1/√d). The biased users' rows are then recomputed by
-- mad2r_biased.sql, which also sets `_dp_biased` on every row of theirs (a per-row flag here, not a
-- window over each user's rows: the window was the costliest operator of this statement, and biased
-- users are few). Also Spark SQL (duckdp/mechanisms/mad/spark.py runs it on Spark).
-- idents: kept, keys
-- params:
WITH kept AS (       -- kept round-2 pairs with b_i and d
  {kept}
)
SELECT _dp_user, {keys}, _dp_d, _dp_b / sqrt(_dp_d) AS _dp_v, 1.0 / sqrt(_dp_d) AS _dp_uw,
       _dp_b < 1 AS _dp_biased
FROM kept
