-- Private GROUP BY, keys="threshold": the keys the threshold kept ({table}, a registered Arrow table, streamed out
-- of agg_user_counts.sql in the engine's order) sorted by the key columns {keys}, so the release's row order is a
-- function of the released keys alone (DESIGN §7).
-- idents: table, keys
-- params:
SELECT * FROM {table} ORDER BY {keys}
