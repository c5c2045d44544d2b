-- Adaptive SIPS with lazy noise, round 2 (duckdp/mechanisms/adaptive_sips/duckdb.py, `may_be_heavy`): whether
-- any user may be heavy enough to cut, from a 1/32 system sample of the stored pairs (whole vectors, so it
-- reads about a 32nd of them): the users whose sampled pairs, times 32, exceed $gate. Only when one does
-- does round 2 count open pairs (adaptive_sips_heavy.sql); else every round runs the statements it runs
-- without heavy users. It sets only which statements run, never the release (`remaining`).
-- idents: pairs
-- params: gate
SELECT count(*) FROM (SELECT _dp_user FROM (SELECT _dp_user FROM {pairs} USING SAMPLE 3.125% (system, 1))
                      GROUP BY _dp_user HAVING 32 * count(*) > $gate)
