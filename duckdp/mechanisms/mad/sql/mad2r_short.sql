-- MAD2R with lazy round-1 noise, the check of a heavy user's prefix (mad2r_prefix.sql): the users with more
-- than $heavy stored pairs ({pairs}: `_dp_size`) that have fewer than $candidates candidates in {candidates}
-- (none at all included). Their prefix held fewer pairs not noised than the limit, so it may have cut the
-- ranking short: their candidates are ranked again over all their pairs (mad2r_unprefix.sql, then
-- mad2r_candidates.sql over these users).
-- idents: pairs, candidates
-- params: heavy, candidates
SELECT _dp_user FROM (SELECT DISTINCT _dp_user FROM {pairs} WHERE _dp_size > $heavy) AS h
ANTI JOIN (SELECT _dp_user FROM {candidates} GROUP BY _dp_user HAVING count(*) >= $candidates) AS c USING (_dp_user)
