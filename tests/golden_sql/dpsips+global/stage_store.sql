-- rendering 1 of 1; binds none
CREATE TEMP TABLE "_duckdp_000000000000_pairs0" AS
SELECT DISTINCT "user_id" AS _dp_user, "item" AS _dp_k0 FROM "memory"."main"."golden_input"
