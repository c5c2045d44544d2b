-- Adaptive SIPS with lazy noise: the keys out of play (released or dropped, level 0) stay in the next
-- state, so a key without a row is one no round has noised yet, not a dropped one.
-- idents: target, state, keys
-- params:
INSERT INTO {target} SELECT {keys}, _dp_level, _dp_round FROM {state} WHERE _dp_level = 0
