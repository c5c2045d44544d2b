-- rendering 1 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs1" AS
SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input") AS s

-- rendering 2 of 3; binds $candidates=70, $trunc_salt=4495534904771661033
CREATE TEMP TABLE "_duckdp_000000000000_candidates4" AS
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p ANTI JOIN "_duckdp_000000000000_state2" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates

-- rendering 3 of 3; binds $candidates=73, $trunc_salt=4427371557954821508
CREATE TEMP TABLE "_duckdp_000000000000_candidates8" AS
SELECT * FROM (
  SELECT *, hash(xor(hash(_dp_user, _dp_k0), $trunc_salt)) AS _dp_order
FROM (SELECT p.* FROM "_duckdp_000000000000_pairs1" AS p ANTI JOIN "_duckdp_000000000000_state6" AS s ON p._dp_k0 IS NOT DISTINCT FROM s._dp_k0) AS unnoised
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
