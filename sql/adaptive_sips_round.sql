-- Adaptive SIPS round, steps 4–6 (specs/adaptive-sips.md): the next per-key state. The noise goes on
-- EVERY key of ∪_u R_u, also keys no user kept in R̃_u (w = 0): the drop/level rule then reads a
-- noisy weight for every key still in play, so one user's presence never changes another's vector.
-- Only keys of ∪_u R̃_u can be released; ŵ itself is never output.
-- idents: next, state, vectors, keys, noise
-- params: scale, noise_salt, threshold, a_drop, a_full, beta_min, round
CREATE TEMP TABLE {next} AS
WITH vectors AS (    -- every pair of R_u with x_ui (sql/adaptive_sips_vectors.sql)
  {vectors}
), weighted AS (     -- step 4: w_i = Σ_u x_ui for every key of ∪_u R_u; support = i ∈ ∪_u R̃_u
  SELECT {keys}, sum(_dp_x) AS _dp_w, bool_or(_dp_kept) AS _dp_support FROM vectors GROUP BY {keys}
), noised AS (       -- ŵ_i = w_i + N(0, σ_j²), one keyed draw per key
  SELECT {keys}, _dp_support,
         _dp_w + $scale * {noise}(hash(xor(hash({keys}), $noise_salt))) AS _dp_noisy FROM weighted
), decided AS (      -- step 5: O_j = support keys with ŵ ≥ T_j; step 6: z = ŵ/σ_j, drop below a_drop,
                     -- level 1 from a_full, β_min between (level 0 = out of play)
  SELECT {keys},
         CASE WHEN _dp_support AND _dp_noisy >= $threshold THEN 0.0::DOUBLE
              WHEN _dp_noisy / $scale < $a_drop THEN 0.0::DOUBLE
              WHEN _dp_noisy / $scale >= $a_full THEN 1.0::DOUBLE
              ELSE $beta_min END AS _dp_level,
         CASE WHEN _dp_support AND _dp_noisy >= $threshold THEN $round END AS _dp_round
  FROM noised
)
SELECT * FROM decided
UNION ALL            -- keys already released or dropped stay out of play
SELECT * FROM {state} WHERE _dp_level = 0
