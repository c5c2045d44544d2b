-- Dense item ids 0..n−1 for the keys in the pairs table, in key order (deterministic).
-- idents: items, pairs, keys
-- params:
CREATE TEMP TABLE {items} AS
SELECT (row_number() OVER (ORDER BY {keys}) - 1)::BIGINT AS _dp_item, {keys}
FROM (SELECT DISTINCT {keys} FROM {pairs})
