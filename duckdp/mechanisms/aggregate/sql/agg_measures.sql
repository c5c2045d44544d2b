-- Private GROUP BY stage 5 (docs/specs/private-group-by.md §2–3): per key, the sums of the per-pair integers
-- (agg_pairs.sql) over each user's kept pairs {kept} (≤ Δ0 keys per user) ({measures}: distinct users = kept
-- pairs, rows, a mean's counted rows, exact HUGEINT grid sums); then every key of {keyset}, with 0 where it has
-- no pairs ({coalesced}), its PRF counter (duckdp/counters.py), sorted by key.
-- idents: kept, keyset, keys, measures, coalesced, counter_hi, counter_lo
-- params:
WITH per_key AS (    -- the true per-key integers on the plan's grids
  SELECT {keys}, {measures} FROM ({kept}) AS kept GROUP BY {keys}
)
SELECT {keys}, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo, {coalesced}
FROM {keyset} AS k LEFT JOIN per_key USING ({keys})
ORDER BY {keys}
