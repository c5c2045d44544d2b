-- Private GROUP BY, keys="threshold" (docs/specs/private-group-by.md §4.2): the stored candidate keys {table}
-- (agg_user_counts.sql's rows) streamed in key order with each key's collision rank `_dp_rank`, as
-- sql/noise_scan_ranked.sql ranks a round's keys: keys sharing a digest counter (duckdp/counters.py) are ranked
-- by key value, so rank r > 0 draws the threshold's noise from its own sub-key; the rest get rank 0.
-- idents: table, keys
-- params:
WITH dup AS (        -- counters held by more than one candidate key
  SELECT _dp_chi, _dp_clo FROM {table} GROUP BY _dp_chi, _dp_clo HAVING count(*) > 1
), ranked AS (       -- rank of each key among the keys sharing its counter
  SELECT t.rowid AS _dp_row,
         row_number() OVER (PARTITION BY t._dp_chi, t._dp_clo ORDER BY {keys}) - 1 AS _dp_rank
  FROM {table} t SEMI JOIN dup ON t._dp_chi = dup._dp_chi AND t._dp_clo = dup._dp_clo
)
SELECT t.*, coalesce(r._dp_rank, 0)::BIGINT AS _dp_rank
FROM {table} t LEFT JOIN ranked r ON t.rowid = r._dp_row
ORDER BY {keys}
