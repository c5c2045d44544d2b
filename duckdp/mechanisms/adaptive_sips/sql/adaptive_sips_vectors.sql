-- Adaptive SIPS round, step 3 (docs/specs/adaptive-sips.md): each kept pair of R̃_u (stage_truncate.sql
-- over R_u: d = |R̃_u|) with its entry x_ui of user u's vector: the levels of R̃_u scaled to unit ℓ2
-- norm, capped at c/√d, the mass the cap removes re-spread over the lower level (one water-filling
-- pass, exact for the two levels {β_min, 1}; for any levels in (0, 1] it keeps ‖x_u‖₂ ≤ 1), a final clip.
-- Σ l² comes from counts, n_hi + n_lo·β² (β the largest lower level: exact for the levels {β_min, 1},
-- an upper bound otherwise), never from a float sum, so no entry depends on the order threads add
-- rows in; and an uncapped vector is l/√Σl² itself, not 1 − n_hi·x_hi² (which cancels when β is small).
-- idents: kept, keys
-- params: cap
WITH kept AS (       -- R̃_u with each key's level and d (stage_truncate.sql)
  {kept}
), counts AS (       -- per user over R̃_u: the level-1 count n_hi, the lower count n_lo and level β
  SELECT _dp_user, count(*) FILTER (WHERE _dp_level >= 1.0) AS _dp_nhi,
         count(*) FILTER (WHERE _dp_level < 1.0) AS _dp_nlo,
         coalesce(max(_dp_level) FILTER (WHERE _dp_level < 1.0), 0.0) AS _dp_lo
  FROM kept GROUP BY _dp_user
), stats AS (        -- Σ l² of the lower levels n_lo·β², and 1/√Σl² = 1/√(n_hi + n_lo·β²)
  SELECT _dp_user, _dp_nhi, _dp_sslo, 1.0 / sqrt(_dp_nhi + _dp_sslo) AS _dp_unit
  FROM (SELECT _dp_user, _dp_nhi, _dp_nlo * _dp_lo * _dp_lo AS _dp_sslo FROM counts) AS c
), scaled AS (       -- with the cap c/√d
  SELECT kept._dp_user, {keys}, _dp_level, _dp_nhi, _dp_sslo, _dp_unit, $cap / sqrt(_dp_d) AS _dp_cap
  FROM kept JOIN stats USING (_dp_user)
)
-- uncapped (1/√Σl² ≤ c/√d, levels ≤ 1): l/√Σl²; else the level-1 entries are c/√d and the others share
-- what those leave of the unit norm, each clipped at the cap
SELECT _dp_user, {keys},
       CASE WHEN _dp_unit <= _dp_cap THEN _dp_level * _dp_unit
            WHEN _dp_level >= 1.0 THEN _dp_cap
            ELSE least(_dp_level * sqrt(greatest(1.0 - _dp_nhi * _dp_cap * _dp_cap, 0.0) / _dp_sslo),
                       _dp_cap) END AS _dp_x
FROM scaled
