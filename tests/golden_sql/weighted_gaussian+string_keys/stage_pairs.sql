-- rendering 1 of 1; binds none
SELECT DISTINCT "user_id" AS _dp_user, ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input"
