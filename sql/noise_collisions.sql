-- Keys sharing a counter (possible only for digest counters): each gets its rank among them by
-- key value (a total order), so rank r > 0 can draw from its own sub-key (duckdp/counters.py).
-- idents: table, keys
-- params:
WITH dup AS (        -- counters held by more than one key present
  SELECT _dp_chi, _dp_clo FROM {table} GROUP BY _dp_chi, _dp_clo HAVING count(*) > 1
)
SELECT t.rowid AS _dp_row, row_number() OVER (PARTITION BY t._dp_chi, t._dp_clo ORDER BY {keys}) - 1 AS _dp_rank
FROM {table} t SEMI JOIN dup ON t._dp_chi = dup._dp_chi AND t._dp_clo = dup._dp_clo
