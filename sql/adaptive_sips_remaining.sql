-- Adaptive SIPS rounds ≥ 2, step 1 (specs/adaptive-sips.md): R_u = S_u \ (O ∪ Dropped), each pair with
-- its key's level. Round 1 wrote a state row for every key of the input (sql/adaptive_sips_round.sql
-- noises every key of ∪_u R_u), so an inner join keeps every pair still in play.
-- idents: pairs, state, match
-- params:
SELECT p.*, s._dp_level FROM {pairs} AS p JOIN {state} AS s ON {match} WHERE s._dp_level > 0
