-- Stage `union`: two key frames with the same columns, concatenated (round outputs are disjoint).
-- idents: first, second
-- params:
({first})
UNION ALL
({second})
