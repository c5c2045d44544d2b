-- Stage `pairs`: the input's distinct (user, key) pairs under internal column names.
-- idents: source, user, key_select
-- params:
SELECT DISTINCT {user} AS _dp_user, {key_select} FROM {source}
