-- Stage `contribution_histogram`: users per bucket of their distinct-key count |W_u|. Bucket b
-- holds the users with $edges[b] ≤ |W_u| < $edges[b+1] (the last bucket is open-ended), so each
-- user is counted in exactly one bucket (ℓ2 sensitivity 1 under add/remove of a user). Only
-- non-empty buckets appear; the caller fills the rest with zeros.
-- idents: pairs
-- params: edges
WITH pairs AS (      -- distinct (user, key) pairs
  {pairs}
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT len(list_filter($edges, lambda e: e <= _dp_size)) - 1 AS _dp_bucket, count(*) AS _dp_users
FROM sizes GROUP BY _dp_bucket ORDER BY _dp_bucket
