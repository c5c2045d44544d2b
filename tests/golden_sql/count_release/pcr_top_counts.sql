-- rendering 1 of 1; binds $tie_salt=4041988694836402461, $top=5
WITH pairs AS (      -- distinct (user, key) pairs
  SELECT DISTINCT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input"
), counts AS (       -- distinct users per key
  SELECT _dp_k0, count(*) AS _dp_count FROM pairs GROUP BY _dp_k0
)
SELECT _dp_k0, _dp_count FROM counts
ORDER BY _dp_count DESC, hash(xor(hash(_dp_k0), $tie_salt)), _dp_k0
LIMIT $top
