-- rendering 1 of 4; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs1" AS
SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input") AS s

-- rendering 2 of 4; binds none
CREATE TEMP TABLE "_duckdp_000000000000_open4" AS
SELECT p.*, s._dp_level FROM "_duckdp_000000000000_pairs1" AS p LEFT JOIN "_duckdp_000000000000_state2" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0
WHERE s._dp_level IS NULL OR s._dp_level > 0

-- rendering 3 of 4; binds $candidates=70, $trunc_salt=4495534904771661033
CREATE TEMP TABLE "_duckdp_000000000000_candidates5" AS
WITH unnoised AS (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM "_duckdp_000000000000_open4" WHERE _dp_level IS NULL) AS unnoised
), sizes AS (        -- each user's count of pairs not noised yet, and the first of them
  SELECT _dp_user, count(*) AS _dp_size, min(_dp_order) AS _dp_first FROM unnoised GROUP BY _dp_user
)
SELECT u.*, s._dp_size > $candidates AS _dp_cut FROM unnoised AS u JOIN sizes AS s USING (_dp_user)
WHERE s._dp_size <= $candidates OR u._dp_order = s._dp_first
   OR u._dp_order::DOUBLE < $candidates::DOUBLE / s._dp_size * 18446744073709551616.0

-- rendering 4 of 4; binds $candidates=73, $trunc_salt=4427371557954821508
CREATE TEMP TABLE "_duckdp_000000000000_candidates9" AS
WITH unnoised AS (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM (SELECT p.* FROM "_duckdp_000000000000_open4" AS p ANTI JOIN "_duckdp_000000000000_state7" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0 WHERE p._dp_level IS NULL) AS o WHERE _dp_level IS NULL) AS unnoised
), sizes AS (        -- each user's count of pairs not noised yet, and the first of them
  SELECT _dp_user, count(*) AS _dp_size, min(_dp_order) AS _dp_first FROM unnoised GROUP BY _dp_user
)
SELECT u.*, s._dp_size > $candidates AS _dp_cut FROM unnoised AS u JOIN sizes AS s USING (_dp_user)
WHERE s._dp_size <= $candidates OR u._dp_order = s._dp_first
   OR u._dp_order::DOUBLE < $candidates::DOUBLE / s._dp_size * 18446744073709551616.0
