-- MAD2R between the rounds (spec §6, paper Alg. 4): round-1 noisy weights and round-2 preprocessing.
-- ŵ1 lives on the whole universe (§2: zero weight off ∪S̃_u), so keys that truncation dropped
-- everywhere still get their noise draw (only users over Δ0 drop keys, so these are among theirs);
-- every decision below is a function of ŵ1 alone, hence identical on neighbouring inputs. ŵ1 itself
-- is never released. Only the exceptions are stored, one row per key released, removed or biased:
-- every key of the input without a row goes to round 2 with β = 1 (mad2r_remaining.sql).
-- idents: target, pairs, keys, weighted, noise
-- params: scale, noise_salt, threshold, threshold2, tau2, lower, upper, max_contributions
CREATE TEMP TABLE {target} AS
WITH weighted AS (   -- round-1 MAD weights (sql/mad_weights.sql), keys of ∪S̃_u only
  {weighted}
), big AS (          -- keys of users over Δ0 (stage_sized.sql): with ∪S̃_u, every key of the input
  SELECT DISTINCT {keys} FROM {pairs} WHERE _dp_size > $max_contributions
), noised AS (       -- ŵ1_i = w_i + N(0, σ1²), one keyed draw per key; support = i ∈ ∪S̃_u
  SELECT {keys}, _dp_w IS NOT NULL AS _dp_support,
         coalesce(_dp_w, 0.0) + $scale * {noise}(hash(xor(hash({keys}), $noise_salt))) AS _dp_noisy
  FROM weighted FULL JOIN big USING ({keys})
), decided AS (      -- O1 = support keys with ŵ1 ≥ T1; round 2 keeps keys (a) not in O1 and (b) with
                     -- U_i = ŵ1 + c_U σ1 ≥ T2; (c) β_i = τ2/L_i where L_i = ŵ1 − c_L σ1 > τ2, else 1
  SELECT {keys},
         _dp_support AND _dp_noisy >= $threshold AS _dp_released,
         NOT (_dp_support AND _dp_noisy >= $threshold) AND _dp_noisy + $upper >= $threshold2 AS _dp_round2,
         CASE WHEN _dp_noisy - $lower > $tau2 THEN $tau2 / (_dp_noisy - $lower) ELSE 1.0 END AS _dp_beta
  FROM noised
)
-- the exceptions: keys not in round 2 (O1 and (b)) or with a bias below 1
SELECT * FROM decided WHERE NOT _dp_round2 OR _dp_beta < 1
