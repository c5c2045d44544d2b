-- rendering 1 of 1; binds $exponent=0.5, $max_contributions=2, $trunc_salt=4041988694836402461
CREATE TEMP TABLE "_duckdp_000000000000_noise0" AS
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w, md5_number_upper(concat(strlen(CAST(_dp_k0 AS VARCHAR))::VARCHAR, ':', CAST(_dp_k0 AS VARCHAR))) AS _dp_chi, md5_number_lower(concat(strlen(CAST(_dp_k0 AS VARCHAR))::VARCHAR, ':', CAST(_dp_k0 AS VARCHAR))) AS _dp_clo
FROM (WITH kept AS (       -- kept (user, key) pairs with d (stage_truncate.sql)
  WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT "user_id" AS _dp_user, ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input"
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * FROM (
  WITH _dp_cut AS (      -- each user over Δ0: the cut, NULL where a tie crosses it
    SELECT _dp_user, CASE WHEN c[$max_contributions] < c[$max_contributions + 1] THEN c[$max_contributions + 1] END AS _dp_t
    FROM (SELECT _dp_user, list_sort(arg_min(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)), hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)), $max_contributions + 1)) AS c FROM sized WHERE _dp_size > $max_contributions
          GROUP BY _dp_user)
  ), _dp_fallback AS (   -- the users whose cut a tie crosses, ranked by the window
    SELECT * FROM sized WHERE _dp_user IN (SELECT _dp_user FROM _dp_cut WHERE _dp_t IS NULL)
  )
  SELECT s.* EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized AS s JOIN _dp_cut USING (_dp_user)
  WHERE hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) < _dp_cut._dp_t
  UNION ALL
  SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM _dp_fallback WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)), _dp_k0)) <= $max_contributions
)
)
SELECT _dp_k0, sum(pow(_dp_d, -$exponent)) AS _dp_w FROM kept GROUP BY _dp_k0)
