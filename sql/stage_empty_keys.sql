-- Stage `empty_keys`: an empty stored key table with the key columns of {like} (filled by stage_append.sql).
-- idents: target, like, keys
-- params:
CREATE TEMP TABLE {target} AS SELECT {keys} FROM {like} LIMIT 0
