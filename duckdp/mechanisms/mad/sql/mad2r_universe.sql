-- MAD2R round-1 weights on the whole universe (spec §6, paper Alg. 4): ŵ1 lives on all keys (§2:
-- zero weight off ∪S̃_u), so keys that truncation dropped everywhere still get their noise draw
-- (only users over Δ0 drop keys, so these are among theirs). `_dp_w` is NULL off the support.
-- idents: weighted, pairs, keys
-- params: max_contributions
WITH weighted AS (   -- round-1 MAD weights (sql/mad_weights.sql), keys of ∪S̃_u only
  {weighted}
), big AS (          -- keys of users over Δ0 (the stored stage_sized.sql pairs): with ∪S̃_u, every key of the input
  SELECT DISTINCT {keys} FROM {pairs} WHERE _dp_size > $max_contributions
)
SELECT {keys}, _dp_w FROM weighted FULL JOIN big USING ({keys})
