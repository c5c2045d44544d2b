-- Private GROUP BY, keys="threshold" (docs/specs/private-group-by.md §4.2): every input row under internal names
-- (user, keys, value columns `_dp_v<j>`), the rows agg_rows.sql restricts; the threshold and the measures read
-- the one Δ0 truncation of their pairs.
-- idents: source, user, key_select, values
-- params:
SELECT {user} AS _dp_user, {key_select}{values} FROM {source}
