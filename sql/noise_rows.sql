-- The keys of chosen rows of a noise-stage table (rows by rowid, from the numpy threshold pass).
-- idents: table, rows, key_output
-- params:
SELECT {key_output} FROM {table} WHERE rowid IN (SELECT _dp_row FROM {rows})
