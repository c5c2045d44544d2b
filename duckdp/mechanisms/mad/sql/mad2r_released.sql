-- MAD2R round-1 output O1 (spec §6): the keys the screen (mad2r_status.sql) marked released.
-- idents: status, keys
-- params:
SELECT {keys} FROM {status} WHERE _dp_released
