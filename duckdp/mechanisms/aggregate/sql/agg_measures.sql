-- Private GROUP BY stage 5 (docs/specs/private-group-by.md §2–3): per key, the sums of the per-pair integers
-- (agg_pairs.sql) over each user's kept pairs {kept} (≤ Δ0 keys per user) ({measures}: distinct users = kept
-- pairs, rows, a mean's counted rows, exact HUGEINT grid sums); then every key of {keyset}, with 0 where it has
-- no pairs ({coalesced}), its PRF counter (duckdp/counters.py), sorted by key. The pairs are grouped by {group}:
-- the keys, or each key's rank `_dp_r` where {kept} has ranks for keys (agg_kept_ranked.sql) and each row of
-- {keyset} carries its key's rank.
-- idents: kept, keyset, keys, group, measures, coalesced, counter_hi, counter_lo
-- params:
WITH per_key AS (    -- the true per-key integers on the plan's grids
  SELECT {group}, {measures} FROM ({kept}) AS kept GROUP BY {group}
)
SELECT {keys}, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo, {coalesced}
FROM {keyset} AS k LEFT JOIN per_key USING ({group})
ORDER BY {keys}
