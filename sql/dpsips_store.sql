-- Add one DP-SIPS round's released keys (the noise stage's output) to the removal set.
-- idents: released, selected, keys
-- params:
INSERT INTO {released}
SELECT {keys} FROM {selected}
