-- Adaptive SIPS step 4 for a round whose state a later round reads (docs/specs/adaptive-sips.md): the
-- weights on EVERY key of ∪_u R_u, also keys no user kept in R̃_u (`_dp_w` NULL there: noise only),
-- so the drop/level rule reads a noisy weight for every key still in play and one user's presence
-- never changes another's vector. Only keys with a weight (∪R̃_u) can be released.
-- idents: remaining, weighted, keys
-- params:
WITH remaining AS (  -- R_u (adaptive_sips_first.sql or adaptive_sips_remaining.sql)
  {remaining}
), weighted AS (     -- w_i over ∪R̃_u (sql/adaptive_sips_weights.sql)
  {weighted}
)
SELECT {keys}, _dp_w FROM (SELECT DISTINCT {keys} FROM remaining) LEFT JOIN weighted USING ({keys})
