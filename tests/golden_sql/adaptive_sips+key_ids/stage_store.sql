-- rendering 1 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs1" AS
SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input") AS s

-- rendering 2 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided2" AS
SELECT * FROM "_duckdp_000000000000_decided0"

-- rendering 3 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided4" AS
SELECT * FROM "_duckdp_000000000000_decided1"
