-- Adaptive SIPS output O = ∪_j O_j (specs/adaptive-sips.md): the keys earlier rounds released (stored
-- in the state) plus the last round's (never stored).
-- idents: state, key_output, last
-- params:
SELECT {key_output} FROM {state} WHERE _dp_round IS NOT NULL
UNION ALL
({last})
