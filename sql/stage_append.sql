-- Stage `append`: add a round's keys to a stored key table (DP-SIPS: P_0 ∪ … ∪ P_i).
-- idents: target, query
-- params:
INSERT INTO {target}
{query}
