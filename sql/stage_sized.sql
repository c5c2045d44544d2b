-- Stage `sized`: (user, key) pairs with their user's pair count |W_u|, the input of stage_truncate.sql.
-- idents: pairs
-- params:
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  {pairs}
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
