-- Optimal partition selection (Desfontaines, Voss, Gipson, Mandayam, PETS 2022, Thm 1): each key's
-- keep probability π(n) for n distinct users (after truncation to Δ0 keys per user), as the weight
-- of the shared noise stage, which keeps the key iff a fresh uniform u ≤ π(n).
-- idents: weighted, keys
-- params: keep_prob
WITH weighted AS (   -- distinct users per key after truncation (stage_weights.sql with exponent 0)
  {weighted}
), keep_prob AS (    -- π(1), …, π(n*−1); keys held by n ≥ n* users have π(n) = 1
  SELECT unnest(range(1, len($keep_prob) + 1)) AS _dp_n, unnest($keep_prob) AS _dp_p
)
SELECT {keys}, coalesce(_dp_p, 1.0) AS _dp_w
FROM weighted LEFT JOIN keep_prob ON _dp_n = CAST(round(_dp_w) AS BIGINT)
