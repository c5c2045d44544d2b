-- Optimal partition selection (Desfontaines, Voss, Gipson, Mandayam, PETS 2022, Thm 1): keep a
-- key held by n distinct users (after truncation to Δ0 keys per user) with probability π(n),
-- decided by one fresh uniform draw per key.
-- idents: weighted, keys, key_output, noise
-- params: keep_prob, noise_salt
WITH weighted AS (   -- distinct users per key after truncation (stage_weights.sql with exponent 0)
  {weighted}
), keep_prob AS (    -- π(1), …, π(n*−1); keys held by n ≥ n* users have π(n) = 1
  SELECT unnest(range(1, len($keep_prob) + 1)) AS _dp_n, unnest($keep_prob) AS _dp_p
), drawn AS (        -- each key's keep probability and a uniform keyed by the key's salted hash
  SELECT {keys}, coalesce(_dp_p, 1.0) AS _dp_p,
         {noise}(hash(xor(hash({keys}), $noise_salt))) AS _dp_u
  FROM weighted LEFT JOIN keep_prob ON _dp_n = CAST(round(_dp_w) AS BIGINT)
), released AS (     -- keys whose uniform falls below π(n): kept with probability exactly π(n)
  SELECT {keys} FROM drawn WHERE _dp_u < _dp_p
)
SELECT {key_output} FROM released
