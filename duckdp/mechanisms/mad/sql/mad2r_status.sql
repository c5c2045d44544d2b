-- MAD2R between the rounds: an empty table typed like the round-1 universe's keys, for the
-- exceptions decided batch by batch from ŵ1 (duckdp/mechanisms/mad.py, screen_round1), one row per
-- key released (O1), removed, or biased. `LIMIT 0` runs nothing; the rows are inserted by name
-- (inserting casts the Arrow keys back to the input's types). Every key of the input without a row
-- goes to round 2 with β = 1 (sql/mad2r_remaining.sql).
-- idents: target, universe, keys
-- params:
CREATE TEMP TABLE {target} AS
SELECT {keys}, NULL::BOOLEAN AS _dp_released, NULL::BOOLEAN AS _dp_round2, NULL::DOUBLE AS _dp_beta
FROM ({universe}) LIMIT 0
