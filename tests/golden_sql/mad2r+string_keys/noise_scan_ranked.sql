-- rendering 1 of 2; binds none
WITH dup AS (        -- counters held by more than one key present
  SELECT _dp_chi, _dp_clo FROM "_duckdp_000000000000_noise3" GROUP BY _dp_chi, _dp_clo HAVING count(*) > 1
), ranked AS (       -- rank of each key among the keys sharing its counter
  SELECT t.rowid AS _dp_row,
         row_number() OVER (PARTITION BY t._dp_chi, t._dp_clo ORDER BY _dp_k0) - 1 AS _dp_rank
  FROM "_duckdp_000000000000_noise3" t SEMI JOIN dup ON t._dp_chi = dup._dp_chi AND t._dp_clo = dup._dp_clo
)
SELECT _dp_k0, t._dp_w, t._dp_chi, t._dp_clo, coalesce(r._dp_rank, 0) AS _dp_rank
FROM "_duckdp_000000000000_noise3" t LEFT JOIN ranked r ON t.rowid = r._dp_row

-- rendering 2 of 2; binds none
WITH dup AS (        -- counters held by more than one key present
  SELECT _dp_chi, _dp_clo FROM "_duckdp_000000000000_noise6" GROUP BY _dp_chi, _dp_clo HAVING count(*) > 1
), ranked AS (       -- rank of each key among the keys sharing its counter
  SELECT t.rowid AS _dp_row,
         row_number() OVER (PARTITION BY t._dp_chi, t._dp_clo ORDER BY _dp_k0) - 1 AS _dp_rank
  FROM "_duckdp_000000000000_noise6" t SEMI JOIN dup ON t._dp_chi = dup._dp_chi AND t._dp_clo = dup._dp_clo
)
SELECT _dp_k0, t._dp_w, t._dp_chi, t._dp_clo, coalesce(r._dp_rank, 0) AS _dp_rank
FROM "_duckdp_000000000000_noise6" t LEFT JOIN ranked r ON t.rowid = r._dp_row
