-- Adaptive SIPS with lazy noise, round 2 (duckdp/mechanisms/adaptive_sips/duckdb.py, `remaining`): the
-- stored pairs that rounds ≥ 2 read, in one pass: every pair of an ordinary user, and of a heavy user
-- (adaptive_sips_heavy.sql) the pairs whose order under round j's truncation salt lies below its bound for
-- round j, for some round j ≥ 2 ({prefixes}: `order_j::DOUBLE < h._dp_b{j−2}` joined by OR, each order
-- stage_truncation_order.sql under that round's salt, drawn up front).
-- idents: pairs, heavy, prefixes
-- params:
SELECT p.* FROM {pairs} AS p LEFT JOIN {heavy} AS h USING (_dp_user) WHERE h._dp_b0 IS NULL OR {prefixes}
