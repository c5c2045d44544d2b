-- Adaptive SIPS: the keys earlier rounds released, from the stored state (sql/adaptive_sips_state.sql).
-- idents: state, keys
-- params:
SELECT {keys} FROM {state} WHERE _dp_round IS NOT NULL
