-- rendering 1 of 3; binds none
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT *, 1.0::DOUBLE AS _dp_level FROM "_duckdp_000000000000_pairs1"
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 2 of 3; binds none
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT * FROM "_duckdp_000000000000_open4" WHERE _dp_level > 0
UNION ALL
SELECT c.* EXCLUDE (_dp_order, _dp_cut), s._dp_level FROM "_duckdp_000000000000_candidates5" AS c JOIN "_duckdp_000000000000_state2" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE s._dp_level > 0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)

-- rendering 3 of 3; binds none
WITH pairs AS (      -- (user, key) pairs, distinct per (user, key), with carried columns
  SELECT p.* EXCLUDE (_dp_level), s._dp_level FROM "_duckdp_000000000000_open4" AS p JOIN "_duckdp_000000000000_state7" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE s._dp_level > 0
), sizes AS (        -- each user's distinct-key count |W_u|
  SELECT _dp_user, count(*) AS _dp_size FROM pairs GROUP BY _dp_user
)
SELECT pairs.*, sizes.* EXCLUDE (_dp_user) FROM pairs JOIN sizes USING (_dp_user)
