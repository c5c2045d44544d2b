-- Adaptive SIPS rounds ≥ 2: the next state created from the keys earlier rounds released (they form the
-- output), typed as the state before (adaptive_sips_state.sql made round 1's); adaptive_sips_decided.sql
-- adds this round's decisions.
-- idents: target, state, keys
-- params:
CREATE TEMP TABLE {target} AS SELECT {keys}, _dp_level, _dp_round FROM {state} WHERE _dp_round IS NOT NULL
