-- Adaptive SIPS round, step 3 (docs/specs/adaptive-sips.md): each kept pair of R̃_u (stage_truncate.sql
-- over R_u: d = |R̃_u|) with its entry x_ui of user u's vector: the levels of R̃_u scaled to unit ℓ2
-- norm, capped at c/√d, the mass the cap removes re-spread over the lower level (one water-filling
-- pass, exact for the two levels {β_min, 1}; for any levels in (0, 1] it keeps ‖x_u‖₂ ≤ 1), a final clip.
-- idents: kept, keys
-- params: cap
WITH kept AS (       -- R̃_u with each key's level and d (stage_truncate.sql)
  {kept}
), stats AS (        -- per user over R̃_u: Σ l², the level-1 count and Σ l² of the lower levels
  SELECT _dp_user, sum(_dp_level * _dp_level) AS _dp_ss, count(*) FILTER (WHERE _dp_level >= 1.0) AS _dp_nhi,
         coalesce(sum(_dp_level * _dp_level) FILTER (WHERE _dp_level < 1.0), 0.0) AS _dp_sslo
  FROM kept GROUP BY _dp_user
), scaled AS (       -- level-1 entries min(1/√Σl², cap), cap = c/√d
  SELECT kept._dp_user, {keys}, _dp_level, _dp_d, _dp_nhi, _dp_sslo,
         least(1.0 / sqrt(_dp_ss), $cap / sqrt(_dp_d)) AS _dp_hi
  FROM kept JOIN stats USING (_dp_user)
)
-- the other entries share what the level-1 entries leave of the unit norm, each clipped at the cap
SELECT _dp_user, {keys},
       CASE WHEN _dp_level >= 1.0 THEN _dp_hi
            ELSE least(_dp_level * sqrt(greatest(1.0 - _dp_nhi * _dp_hi * _dp_hi, 0.0) / _dp_sslo),
                       $cap / sqrt(_dp_d)) END AS _dp_x
FROM scaled
