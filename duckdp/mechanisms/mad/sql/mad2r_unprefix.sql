-- MAD2R with lazy round-1 noise, the fallback of a heavy user's prefix: the candidates of the users in
-- {short} (mad2r_short.sql) are deleted, to be ranked again over all of their pairs (mad2r_candidates.sql).
-- idents: candidates, short
-- params:
DELETE FROM {candidates} WHERE _dp_user IN (SELECT _dp_user FROM {short})
