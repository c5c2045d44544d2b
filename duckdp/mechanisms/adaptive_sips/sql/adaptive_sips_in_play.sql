-- Adaptive SIPS rounds ≥ 2: the keys of ∪_u R_u (docs/specs/adaptive-sips.md, step 1), once each,
-- read from the state: its keys with a level > 0 are exactly ∪_u R_u (each was in the previous round's
-- ∪R_u, so some user holds it, and it was neither released nor dropped since), so the round need not
-- group the remaining pairs (as many as the input's) by key again: a user with millions of keys costs
-- a join per round, not a join and a group-by (adaptive_sips_universe.sql reads it). With lazy noise
-- (duckdp/mechanisms/adaptive_sips/duckdb.py) they are the keys of ∪_u R_u noised so far: ∪R̃_u and
-- more, the rest are noised when a truncation needs them.
-- idents: state, keys
-- params:
SELECT {keys} FROM {state} WHERE _dp_level > 0
