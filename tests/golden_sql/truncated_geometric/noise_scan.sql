-- rendering 1 of 1; binds $exponent=0.0, $keep_prob=[5e-06, 1.3243606353500642e-05, 2.683501549579587e-05, 4.92434608474862e-05, 8.618874134213946e-05, 0.00014710121114565685, 0.0002475288957615952, 0.00041310615555505684, 0.0006860969057207782, 0.0011361825622233875, 0.001878248357736271, 0.0031017080190573736, 0.00511885198652105, 0.008444560151742862, 0.013927725943885158, 0.022967938016165482, 0.037872727951374134, 0.06244657215286983, 0.10296199179074679, 0.16976062593905622, 0.2798929549130899, 0.46147046828432325, 0.6733683605070536, 0.8018909288686227, 0.8798438070449273, 0.9271246176716998, 0.9558018789329042, 0.9731955171244141, 0.9837452919715135, 0.9901440538693445, 0.9940250991445799, 0.9963790720957431, 0.9978068288627577, 0.9986728071165643, 0.9991980494781424, 0.9995166250742193, 0.9997098509406763, 0.999827048352932, 0.999898132176704, 0.9999412466952313, 0.999967396972597, 0.9999832579175791, 0.9999928780670029, 0.9999987129825794], $max_contributions=2, $trunc_salt=4041988694836402461
SELECT _dp_k0, _dp_w::DOUBLE AS _dp_w
FROM (WITH weighted AS (   -- distinct users per key after truncation (stage_weights.sql with exponent 0)
  WITH kept AS (       -- kept (user, key) pairs with d (stage_truncate.sql)
  WITH sized AS (
  WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input"
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
)
SELECT * EXCLUDE (_dp_size), _dp_size::DOUBLE AS _dp_d FROM sized WHERE _dp_size <= $max_contributions
UNION ALL
SELECT * EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM sized WHERE _dp_size > $max_contributions
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY row(hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)))) <= $max_contributions
)
SELECT _dp_k0, sum(pow(_dp_d, -$exponent)) AS _dp_w FROM kept GROUP BY _dp_k0
), keep_prob AS (    -- π(1), …, π(n*−1); keys held by n ≥ n* users have π(n) = 1
  SELECT unnest(range(1, len($keep_prob) + 1)) AS _dp_n, unnest($keep_prob) AS _dp_p
)
SELECT _dp_k0, coalesce(_dp_p, 1.0) AS _dp_w
FROM weighted LEFT JOIN keep_prob ON _dp_n = CAST(round(_dp_w) AS BIGINT))
