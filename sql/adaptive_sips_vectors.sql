-- Adaptive SIPS round, steps 1–3 (specs/adaptive-sips.md): every pair of R_u with its entry x_ui of
-- user u's vector (0 for pairs outside the truncated set R̃_u). x_u: the levels of R̃_u scaled to unit
-- ℓ2 norm, capped at c/√d, the mass the cap removes re-spread over the lower level (one water-filling pass,
-- exact for the two levels {β_min, 1}; for any levels in (0, 1] it keeps ‖x_u‖₂ ≤ 1), a final clip.
-- idents: remaining, keys
-- params: max_contributions, trunc_salt, cap
WITH remaining AS (  -- step 1: R_u with each key's level (sql/adaptive_sips_first.sql / _remaining.sql)
  {remaining}
), sizes AS (        -- per user: |R_u|, Σ l², the level-1 count and Σ l² of the lower levels over R_u
                     -- (which is R̃_u for users within Δ0)
  SELECT _dp_user, count(*) AS _dp_size, sum(_dp_level * _dp_level) AS _dp_ss,
         count(*) FILTER (WHERE _dp_level >= 1.0) AS _dp_nhi,
         coalesce(sum(_dp_level * _dp_level) FILTER (WHERE _dp_level < 1.0), 0.0) AS _dp_sslo
  FROM remaining GROUP BY _dp_user
), sized AS (
  SELECT remaining.*, _dp_size, _dp_ss, _dp_nhi, _dp_sslo FROM remaining JOIN sizes USING (_dp_user)
), ranked AS (       -- step 2 for users over Δ0: R̃_u = their Δ0 keys of smallest keyed hash (fresh salt)
  SELECT _dp_user, {keys}, _dp_level,
         row_number() OVER (PARTITION BY _dp_user
                            ORDER BY hash(xor(hash(_dp_user, {keys}), $trunc_salt))) <= $max_contributions AS _dp_kept
  FROM sized WHERE _dp_size > $max_contributions
), big AS (          -- their statistics over R̃_u
  SELECT _dp_user, sum(_dp_level * _dp_level) AS _dp_ss, count(*) FILTER (WHERE _dp_level >= 1.0) AS _dp_nhi,
         coalesce(sum(_dp_level * _dp_level) FILTER (WHERE _dp_level < 1.0), 0.0) AS _dp_sslo
  FROM ranked WHERE _dp_kept GROUP BY _dp_user
), entries AS (      -- every pair of R_u: kept in R̃_u?, d = |R̃_u| and the statistics of R̃_u
  SELECT _dp_user, {keys}, _dp_level, true AS _dp_kept, _dp_size::DOUBLE AS _dp_d, _dp_ss, _dp_nhi, _dp_sslo
  FROM sized WHERE _dp_size <= $max_contributions
  UNION ALL
  SELECT _dp_user, {keys}, _dp_level, _dp_kept, $max_contributions::DOUBLE, _dp_ss, _dp_nhi, _dp_sslo
  FROM ranked JOIN big USING (_dp_user)
), scaled AS (       -- step 3: level-1 entries min(1/√Σl², cap), cap = c/√d
  SELECT *, least(1.0 / sqrt(_dp_ss), $cap / sqrt(_dp_d)) AS _dp_hi FROM entries
)
-- the other entries share what the level-1 entries leave of the unit norm, each clipped at the cap
SELECT _dp_user, {keys}, _dp_kept,
       CASE WHEN NOT _dp_kept THEN 0.0
            WHEN _dp_level >= 1.0 THEN _dp_hi
            ELSE least(_dp_level * sqrt(greatest(1.0 - _dp_nhi * _dp_hi * _dp_hi, 0.0) / _dp_sslo),
                       $cap / sqrt(_dp_d)) END AS _dp_x
FROM scaled
