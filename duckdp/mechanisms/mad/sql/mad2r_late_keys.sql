-- MAD2R with lazy round-1 noise: keys to screen now, once each and with no weight (no user kept them
-- in round 1: `_dp_w` NULL, as mad2r_universe.sql gives such keys), those of {pairs} that round 1 did
-- not noise ({support}: the round-1 user vectors). First pass: {pairs} = the candidates
-- (mad2r_candidates.sql), {screened} and {users} empty. Second pass: {pairs} = the stored pairs,
-- {users} a filter to the users that did not settle (mad2r_unsettled.sql), {screened} an anti-join
-- with the candidates (screened in the first pass).
-- idents: pairs, support, match, screened, users, keys
-- params:
SELECT DISTINCT {keys}, NULL::DOUBLE AS _dp_w
FROM (SELECT p.* FROM {pairs} AS p ANTI JOIN {support} AS s ON {match}{screened}{users}) AS late
