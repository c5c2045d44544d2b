-- Truncated (user, key) pairs for the sequential policies (Gopi et al. journal Alg. 2), from
-- stage_truncate.sql. _dp_n = 1: the policies ignore how often a user holds a key.
-- idents: pairs, kept, keys
-- params:
CREATE TEMP TABLE {pairs} AS
WITH kept AS (       -- kept pairs (stage_truncate.sql)
  {kept}
)
SELECT _dp_user, {keys}, 1 AS _dp_n FROM kept
