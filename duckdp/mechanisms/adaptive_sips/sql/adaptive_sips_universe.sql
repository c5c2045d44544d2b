-- Adaptive SIPS step 4 for a round whose state a later round reads (docs/specs/adaptive-sips.md): the
-- weights on EVERY key of ∪_u R_u, also keys no user kept in R̃_u (`_dp_w` NULL there: noise only),
-- so the drop/level rule reads a noisy weight for every key still in play and one user's presence
-- never changes another's vector. Only keys with a weight (∪R̃_u) can be released.
-- idents: in_play, weighted, keys
-- params:
WITH in_play AS (    -- the keys of ∪_u R_u, once (adaptive_sips_in_play_first.sql / adaptive_sips_in_play.sql)
  {in_play}
), weighted AS (     -- w_i over ∪R̃_u (sql/adaptive_sips_weights.sql)
  {weighted}
)
SELECT {keys}, _dp_w FROM in_play LEFT JOIN weighted USING ({keys})
