-- Adaptive SIPS with lazy noise, round 2 (duckdp/mechanisms/adaptive_sips/duckdb.py, `reduced_pairs`): the
-- heavy users, each with one prefix bound per round ≥ 2 ({bounds}: adaptive_sips_prefix_bound.sql as
-- `_dp_b0`, `_dp_b1`, …, from `_dp_n`). Rounds ≥ 2 read only a heavy user's pairs whose order under some
-- round's truncation salt lies below that round's bound (adaptive_sips_prefixes.sql). `_dp_n` estimates the
-- user's open pairs (key not out of play after round 1, {state}): 16 × their count among the pairs whose
-- (unkeyed) hash lies in the first 1/16 of its range, so only a sixteenth of the pairs is joined and grouped.
-- Which users are heavy and their bounds only set how many pairs rounds ≥ 2 read and how often the fallback
-- runs, never the release (`remaining`).
-- idents: pairs, bounds, keys, state, match
-- params: heavy
SELECT _dp_user, _dp_n{bounds}
FROM (SELECT p._dp_user, 16 * count(*) AS _dp_n
      FROM (SELECT * FROM {pairs} WHERE hash(_dp_user, {keys}) < 1152921504606846976) AS p
      LEFT JOIN {state} AS s ON {match}
      WHERE s._dp_level IS NULL OR s._dp_level > 0
      GROUP BY p._dp_user HAVING 16 * count(*) > $heavy) AS n
