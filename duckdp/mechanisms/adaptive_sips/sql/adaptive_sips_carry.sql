-- Adaptive SIPS: the keys earlier rounds released stay in the next state (they form the output).
-- idents: target, state, keys
-- params:
INSERT INTO {target} SELECT {keys}, _dp_level, _dp_round FROM {state} WHERE _dp_round IS NOT NULL
