-- rendering 1 of 5; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs0" AS
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input"
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 2 of 5; binds none
CREATE TEMP TABLE "_duckdp_000000000000_vectors2" AS
WITH kept AS (       -- kept pairs with d (stage_truncate.sql)
  SELECT * FROM "_duckdp_000000000000_kept1"
)
SELECT _dp_user, _dp_k0, _dp_d, 1.0 / sqrt(_dp_d) AS _dp_uw FROM kept

-- rendering 3 of 5; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided3" AS
SELECT * FROM "_duckdp_000000000000_decided4"

-- rendering 4 of 5; binds $beta_min=0.5
CREATE TEMP TABLE "_duckdp_000000000000_sized6" AS
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT _dp_user, _dp_k0, greatest(least(coalesce(_dp_beta, 1.0), 1.0), $beta_min) AS _dp_b
FROM "_duckdp_000000000000_pairs0" AS p LEFT JOIN "_duckdp_000000000000_status5" USING (_dp_k0) WHERE _dp_round2 IS NOT false
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 5 of 5; binds none
CREATE TEMP TABLE "_duckdp_000000000000_vectors28" AS
WITH kept AS (       -- kept round-2 pairs with b_i and d
  SELECT * FROM "_duckdp_000000000000_kept7"
)
SELECT _dp_user, _dp_k0, _dp_d, _dp_b / sqrt(_dp_d) AS _dp_v, 1.0 / sqrt(_dp_d) AS _dp_uw,
       bool_or(_dp_b < 1) OVER (PARTITION BY _dp_user) AS _dp_biased
FROM kept
