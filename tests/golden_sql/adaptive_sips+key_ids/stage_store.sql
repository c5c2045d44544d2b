-- rendering 1 of 7; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs1" AS
SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input") AS s

-- rendering 2 of 7; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided2" AS
SELECT * FROM "_duckdp_000000000000_decided3"

-- rendering 3 of 7; binds $candidates=70, $trunc_salt=4495534904771661033
CREATE TEMP TABLE "_duckdp_000000000000_candidates5" AS
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p ANTI JOIN "_duckdp_000000000000_state4" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 4 of 7; binds $candidates=70, $max_contributions=2
CREATE TEMP TABLE "_duckdp_000000000000_unsettled7" AS
WITH c AS (          -- each candidate pair with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM "_duckdp_000000000000_candidates5" AS c JOIN "_duckdp_000000000000_state4" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
), cut AS (          -- users cut at the limit, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user HAVING count(*) >= $candidates
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions

-- rendering 5 of 7; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided8" AS
SELECT * FROM "_duckdp_000000000000_decided9"

-- rendering 6 of 7; binds $candidates=73, $trunc_salt=4427371557954821508
CREATE TEMP TABLE "_duckdp_000000000000_candidates11" AS
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p ANTI JOIN "_duckdp_000000000000_state10" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 7 of 7; binds $candidates=73, $max_contributions=2
CREATE TEMP TABLE "_duckdp_000000000000_unsettled12" AS
WITH c AS (          -- each candidate pair with its key's level
  SELECT c._dp_user, c._dp_order, s._dp_level FROM "_duckdp_000000000000_candidates11" AS c JOIN "_duckdp_000000000000_state10" AS s ON c._dp_k0 IS NOT DISTINCT FROM s._dp_k0
), cut AS (          -- users cut at the limit, with the order of their last candidate
  SELECT _dp_user, max(_dp_order) AS _dp_last FROM c GROUP BY _dp_user HAVING count(*) >= $candidates
)
SELECT _dp_user FROM cut JOIN c USING (_dp_user)
GROUP BY _dp_user, _dp_last
HAVING count(*) FILTER (WHERE _dp_level > 0 AND _dp_order < _dp_last) < $max_contributions
