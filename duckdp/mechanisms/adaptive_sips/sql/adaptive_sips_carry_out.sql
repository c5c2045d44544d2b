-- Adaptive SIPS rounds ≥ 2 with lazy noise: the next state created from the keys out of play (released
-- or dropped, level 0), so a key without a row is one no round has noised yet, not a dropped one; typed
-- as the state before (adaptive_sips_state.sql made round 1's); adaptive_sips_decided.sql adds this
-- round's decisions.
-- idents: target, state, keys
-- params:
CREATE TEMP TABLE {target} AS SELECT {keys}, _dp_level, _dp_round FROM {state} WHERE _dp_level = 0
