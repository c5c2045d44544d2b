-- A stored table of keys with digest counters ({table}: the materialised weights of sql/noise_weights.sql,
-- or a mechanism's own, e.g. private GROUP BY's threshold candidates) streamed with each key's collision
-- rank: keys sharing a counter (possible only for digest counters) are ranked by key value (a total
-- order) so rank r > 0 draws from its own sub-key (duckdp/counters.py); the rest get rank 0. The one
-- place collision ranks are written in SQL. Columns: {columns} (of `t`), `_dp_rank`; {order}: empty or
-- an ORDER BY.
-- idents: table, keys, columns, order
-- params:
WITH dup AS (        -- counters held by more than one key present
  SELECT _dp_chi, _dp_clo FROM {table} GROUP BY _dp_chi, _dp_clo HAVING count(*) > 1
), ranked AS (       -- rank of each key among the keys sharing its counter
  SELECT t.rowid AS _dp_row,
         row_number() OVER (PARTITION BY t._dp_chi, t._dp_clo ORDER BY {keys}) - 1 AS _dp_rank
  FROM {table} t SEMI JOIN dup ON t._dp_chi = dup._dp_chi AND t._dp_clo = dup._dp_clo
)
SELECT {columns}, coalesce(r._dp_rank, 0) AS _dp_rank
FROM {table} t LEFT JOIN ranked r ON t.rowid = r._dp_row{order}
