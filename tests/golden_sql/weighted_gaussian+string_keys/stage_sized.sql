-- rendering 1 of 1; binds none
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT "user_id" AS _dp_user, ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input"
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
