-- Private GROUP BY stage 1, restrict (docs/specs/private-group-by.md §2): the input's rows under internal
-- names (user, keys, value columns `_dp_v<j>`) whose key is in the key set {keyset} (a semi-join on {match};
-- keys are never NULL, refused by the run, so equality matches as IS NOT DISTINCT FROM would). For a fixed
-- key set this is a per-user function of the user's own rows.
-- idents: source, user, key_select, values, keyset, match
-- params:
SELECT r.* FROM (SELECT {user} AS _dp_user, {key_select}{values} FROM {source}) AS r
SEMI JOIN {keyset} AS k ON {match}
