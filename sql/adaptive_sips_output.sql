-- Adaptive SIPS output O = ∪_j O_j (specs/adaptive-sips.md): the keys released in some round.
-- idents: state, key_output
-- params:
SELECT {key_output} FROM {state} WHERE _dp_round IS NOT NULL
