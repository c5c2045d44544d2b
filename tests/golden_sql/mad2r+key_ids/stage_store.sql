-- rendering 1 of 2; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs1" AS
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input") AS s
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 2 of 2; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided3" AS
SELECT * FROM "_duckdp_000000000000_decided0"
