-- rendering 1 of 2; binds none
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input") AS s
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 2 of 2; binds $trunc_salt=4495534904771661033
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT _dp_user, _dp_k0
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p LEFT JOIN "_duckdp_000000000000_cuts8" AS c USING (_dp_user)
WHERE c._dp_last IS NULL OR hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) <= c._dp_last) AS p
ANTI JOIN (SELECT _dp_k0 FROM "_duckdp_000000000000_status3" WHERE _dp_round2 = false) AS out USING (_dp_k0)
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
