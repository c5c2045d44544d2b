-- rendering 1 of 1; binds none
CREATE TEMP TABLE "_duckdp_000000000000_key_ids0" AS
SELECT hash(_dp_k0) AS _dp_id, * FROM (SELECT DISTINCT ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input")
