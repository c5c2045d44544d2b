-- Adaptive SIPS steps 5–6 stored (docs/specs/adaptive-sips.md): the next per-key public state, one row
-- per key of ∪_u R_u still in play (level decided in numpy from ŵ: duckdp/mechanisms/adaptive_sips.py,
-- next_state; 0 = released or dropped) or released, plus the keys earlier rounds released (the output).
-- Dropped keys need no row: rounds read only keys with a level > 0 (with lazy noise they keep one,
-- adaptive_sips_carry_out.sql: a key without a row is then one not noised yet). This creates round 1's
-- table empty, typed like the input's keys (`LIMIT 0` runs nothing); later rounds' tables start as the
-- rows they carry (adaptive_sips_carry.sql, adaptive_sips_carry_out.sql); adaptive_sips_decided.sql
-- fills them.
-- idents: target, universe, keys
-- params:
CREATE TEMP TABLE {target} AS
SELECT {keys}, 0.0::DOUBLE AS _dp_level, NULL::INTEGER AS _dp_round FROM ({universe}) LIMIT 0
