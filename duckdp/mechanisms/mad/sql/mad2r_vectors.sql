-- MAD2R round-2 user vectors (spec §6 step c, §4 UserWeights): one row per kept (user, key) of
-- mad2r_remaining.sql, re-cut to Δ0 with a fresh salt (stage_truncate.sql), each with v_i = 1/√d, the
-- entry w^u_i = 1/√d and `_dp_biased` false: the UserWeights vector of a user with no kept b_i < 1 (§4,
-- unbiased case: v has norm 1 and no entry above cap = β_max/√d ≥ 1/√d). The kept pairs whose key has a
-- bias b_i < 1 then get v_i = b_i/√d and `_dp_biased` (mad2r_kept_biases.sql: §4 reads the biases of the
-- kept set S only, so keys the truncation dropped play no part; a user is biased when any of its rows is),
-- and the biased users' rows are recomputed by mad2r_biased.sql, which sets `_dp_biased` on every row of
-- theirs. No join here: the biases are a function of the key, joined to the few kept pairs that have one
-- after the truncation, whose per-user top-Δ0 then carries no bias column. DuckDB only: Spark computes
-- these rows with the biases in place in one statement (mad2r_vectors_biased.sql).
-- idents: kept, keys
-- params:
WITH kept AS (       -- kept round-2 pairs with d
  {kept}
)
SELECT _dp_user, {keys}, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_v, 1.0 / sqrt(_dp_d) AS _dp_uw, false AS _dp_biased
FROM kept
