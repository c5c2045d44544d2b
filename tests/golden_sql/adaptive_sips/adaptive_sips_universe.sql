-- rendering 1 of 1; binds $cap=2.0, $max_contributions=2, $trunc_salt=4495534904771661033
WITH in_play AS (    -- the keys of ∪_u R_u, once (adaptive_sips_in_play_first.sql / adaptive_sips_in_play.sql)
  SELECT _dp_k0 FROM "_duckdp_000000000000_state1" WHERE _dp_level > 0
), weighted AS (     -- w_i over ∪R̃_u (sql/adaptive_sips_weights.sql)
  WITH vectors AS (    -- x_ui per kept pair (sql/adaptive_sips_vectors.sql)
  WITH kept AS (       -- R̃_u with each key's level and d (stage_truncate.sql)
  WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT * FROM "_duckdp_000000000000_open3" WHERE _dp_level > 0
UNION ALL
SELECT c.* EXCLUDE (_dp_order, _dp_cut), s._dp_level FROM "_duckdp_000000000000_candidates4" AS c JOIN "_duckdp_000000000000_state1" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE s._dp_level > 0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
), counts AS (       -- per user over R̃_u: the level-1 count n_hi, the lower count n_lo and level β
  SELECT _dp_user, count(*) FILTER (WHERE _dp_level >= 1.0) AS _dp_nhi,
         count(*) FILTER (WHERE _dp_level < 1.0) AS _dp_nlo,
         coalesce(max(_dp_level) FILTER (WHERE _dp_level < 1.0), 0.0) AS _dp_lo
  FROM kept GROUP BY _dp_user
), stats AS (        -- Σ l² of the lower levels n_lo·β², and 1/√Σl² = 1/√(n_hi + n_lo·β²)
  SELECT _dp_user, _dp_nhi, _dp_sslo, 1.0 / sqrt(_dp_nhi + _dp_sslo) AS _dp_unit
  FROM (SELECT _dp_user, _dp_nhi, _dp_nlo * _dp_lo * _dp_lo AS _dp_sslo FROM counts) AS c
), scaled AS (       -- with the cap c/√d
  SELECT kept._dp_user, _dp_k0, _dp_level, _dp_nhi, _dp_sslo, _dp_unit, $cap / sqrt(_dp_d) AS _dp_cap
  FROM kept JOIN stats USING (_dp_user)
)
SELECT _dp_user, _dp_k0,
       CASE WHEN _dp_unit <= _dp_cap THEN _dp_level * _dp_unit
            WHEN _dp_level >= 1.0 THEN _dp_cap
            ELSE least(_dp_level * sqrt(greatest(1.0 - _dp_nhi * _dp_cap * _dp_cap, 0.0) / _dp_sslo),
                       _dp_cap) END AS _dp_x
FROM scaled
)
SELECT _dp_k0, sum(_dp_x) AS _dp_w FROM vectors GROUP BY _dp_k0
)
SELECT _dp_k0, _dp_w FROM in_play LEFT JOIN weighted USING (_dp_k0)
