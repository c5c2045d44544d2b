-- rendering 1 of 1; binds none
SELECT DISTINCT s._dp_user, hash(s._dp_k0) AS _dp_k0
FROM (SELECT "user_id" AS _dp_user, ("item" COLLATE "binary") AS _dp_k0 FROM "memory"."main"."golden_input") AS s
