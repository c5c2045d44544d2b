-- Adaptive SIPS steps 5–6 stored (docs/specs/adaptive-sips.md): the next per-key public state, one row
-- per key of ∪_u R_u with the level decided in numpy from ŵ (duckdp/mechanisms/adaptive_sips.py,
-- next_state; 0 = released or dropped) and the round that released it, plus the keys earlier rounds
-- released (the output). Dropped keys need no row: rounds read only keys with a level > 0.
-- idents: target, noised, decided, keys, state
-- params:
CREATE TEMP TABLE {target} AS
SELECT {keys}, d._dp_level, d._dp_round
FROM {noised} AS t JOIN {decided} AS d ON t.rowid = d._dp_row
WHERE d._dp_level > 0 OR d._dp_round IS NOT NULL
UNION ALL
SELECT {keys}, _dp_level, _dp_round FROM {state} WHERE _dp_round IS NOT NULL
