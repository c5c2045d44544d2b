-- Stage `output`: key frames back under the input's column names.
-- idents: keys_query, key_output
-- params:
SELECT {key_output} FROM ({keys_query})
