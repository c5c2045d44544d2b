-- Adaptive SIPS with lazy noise, the fallback (rare): heavy users whose round-j prefix did not settle R̃_u
-- (adaptive_sips_unsettled.sql) get back every stored pair the open pairs lack ({open}: this round's open
-- pairs, adaptive_sips_open.sql), with no level (NULL: read as "not noised before this round", so the second
-- pass makes candidates of them; keys noised or out of play already have a state row, which the candidates'
-- noise and R'_u look up), and are ordinary users from then on (their row leaves {heavy}, next statement).
-- idents: open, pairs, unsettled, heavy, match
-- params:
INSERT INTO {open} BY NAME
SELECT p.*, NULL::DOUBLE AS _dp_level FROM {pairs} AS p
SEMI JOIN (SELECT _dp_user FROM {unsettled} SEMI JOIN {heavy} USING (_dp_user)) AS u USING (_dp_user)
ANTI JOIN {open} AS o ON p._dp_user = o._dp_user AND {match};
DELETE FROM {heavy} WHERE _dp_user IN (SELECT _dp_user FROM {unsettled})
