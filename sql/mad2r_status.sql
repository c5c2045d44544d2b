-- MAD2R between the rounds: the exceptions decided in numpy from ŵ1 (duckdp/mechanisms/mad.py,
-- screen_round1), one row per key released (O1), removed, or biased, with the key itself.
-- Every key of the input without a row goes to round 2 with β = 1 (sql/mad2r_remaining.sql).
-- idents: target, noised, exceptions, keys
-- params:
CREATE TEMP TABLE {target} AS
SELECT {keys}, e._dp_released, e._dp_round2, e._dp_beta
FROM {noised} AS t JOIN {exceptions} AS e ON t.rowid = e._dp_row
