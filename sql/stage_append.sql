-- Stage `append`: add rows to a stored table: a round's keys to the released ones (DP-SIPS: P_0 ∪ … ∪ P_i),
-- or one user-hash part's rows to a per-user query stored in parts (DuckDBStages.store_by_user_part).
-- idents: target, query
-- params:
INSERT INTO {target}
{query}
