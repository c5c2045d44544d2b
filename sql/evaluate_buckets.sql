-- evaluate (non-private): per key-frequency bucket the number of true keys, of released keys, of
-- (user, key) entries and of entries whose key was released.
-- idents: source, user, key_select, keys, released, match, bucket
-- params:
WITH pairs AS (      -- distinct (user, key) entries
  SELECT DISTINCT {user} AS _dp_user, {key_select} FROM {source}
), freq AS (         -- each key's number of distinct users
  SELECT {keys}, count(*) AS _dp_users FROM pairs GROUP BY ALL
), released AS (     -- the release's distinct keys
  SELECT DISTINCT {keys}, true AS _dp_hit FROM {released}
), marked AS (       -- every true key with its bucket and whether it was released
  SELECT _dp_users, {bucket} AS _dp_bucket, coalesce(r._dp_hit, false) AS _dp_released
  FROM freq f LEFT JOIN released r ON {match}
)
SELECT _dp_bucket, count(*), count(*) FILTER (WHERE _dp_released),
       sum(_dp_users), coalesce(sum(_dp_users) FILTER (WHERE _dp_released), 0)
FROM marked GROUP BY _dp_bucket ORDER BY _dp_bucket
