-- rendering 1 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs0" AS
SELECT DISTINCT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input"

-- rendering 2 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided1" AS
SELECT * FROM "_duckdp_000000000000_decided0"

-- rendering 3 of 3; binds none
CREATE TEMP TABLE "_duckdp_000000000000_decided3" AS
SELECT * FROM "_duckdp_000000000000_decided1"
