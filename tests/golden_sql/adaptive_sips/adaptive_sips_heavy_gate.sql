-- rendering 1 of 1; binds $gate=73216
SELECT count(*) FROM (SELECT _dp_user FROM (SELECT _dp_user FROM "_duckdp_000000000000_pairs0" USING SAMPLE 3.125% (system, 1))
                      GROUP BY _dp_user HAVING 32 * count(*) > $gate)
