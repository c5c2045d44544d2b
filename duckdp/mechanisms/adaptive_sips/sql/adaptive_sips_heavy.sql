-- Adaptive SIPS with lazy noise (duckdp/mechanisms/adaptive_sips/duckdb.py, `remaining`): the heavy users,
-- those with more than $heavy stored pairs, each with one prefix bound per round ≥ 2 ({bounds}:
-- adaptive_sips_prefix_bound.sql as `_dp_b0`, `_dp_b1`, …). Rounds ≥ 2 read only a heavy user's pairs
-- whose order under some round's truncation salt lies below that round's bound (adaptive_sips_prefixes.sql).
-- idents: pairs, bounds
-- params: heavy
SELECT _dp_user{bounds} FROM {pairs} GROUP BY _dp_user HAVING count(*) > $heavy
