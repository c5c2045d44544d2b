-- DP-SIPS output S = P_0 ∪ … ∪ P_{I−1}: every round's keys, stored in the removal set.
-- idents: released, key_output
-- params:
SELECT {key_output} FROM {released}
