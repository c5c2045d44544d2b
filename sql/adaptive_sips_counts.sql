-- Adaptive SIPS: how many keys each round released (for the report).
-- idents: state
-- params:
SELECT _dp_round, count(*) FROM {state} WHERE _dp_round IS NOT NULL GROUP BY _dp_round
