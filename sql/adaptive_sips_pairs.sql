-- Adaptive SIPS set-up (specs/adaptive-sips.md): the distinct (user, key) pairs, read from the input
-- once, and the empty per-key public state (no key released or dropped yet, every level 1).
-- idents: pairs, state, distinct, keys
-- params:
CREATE TEMP TABLE {pairs} AS      -- distinct (user, key) pairs (sql/pairs.sql)
  {distinct};
CREATE TEMP TABLE {state} AS      -- per-key state: level (0 = released or dropped) and release round
  SELECT {keys}, 1.0::DOUBLE AS _dp_level, NULL::INTEGER AS _dp_round FROM {pairs} LIMIT 0;
