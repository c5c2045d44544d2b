-- Private GROUP BY stages 3–5 (docs/specs/private-group-by.md §2–3): the rows {rows} of each user's kept
-- pairs {kept} (≤ Δ0 keys per user); per (user, key) at most $max_rows rows by the keyed order
-- hash(xor(hash(user, key, value), $row_salt)) ({ranks}: one row number per value column, NULL values
-- last and never counted, plus `_dp_r` over all rows for counts), values clipped and rounded onto
-- each measure's grid ({measures}: exact HUGEINT sums); then every key of {keyset}, with 0 where it has no
-- rows ({coalesced}), its PRF counter (duckdp/counters.py), sorted by key.
-- idents: rows, kept, keyset, keys, match, ranks, measures, coalesced, counter_hi, counter_lo
-- params: max_rows, row_salt
WITH kept AS (
  {kept}
), knobs AS (        -- the row cap m and the sample's salt, read by {ranks} and {measures}
  SELECT $max_rows::BIGINT AS _dp_max_rows, $row_salt AS _dp_row_salt
), sampled AS (      -- the kept pairs' rows with their per-(user, key) sample ranks
  SELECT r.*, knobs.*, {ranks} FROM (SELECT * FROM ({rows}) AS r SEMI JOIN kept ON {match}) AS r CROSS JOIN knobs
), per_key AS (      -- the true per-key integers on the plan's grids
  SELECT {keys}, {measures} FROM sampled GROUP BY {keys}
)
SELECT {keys}, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo, {coalesced}
FROM {keyset} AS k LEFT JOIN per_key USING ({keys})
ORDER BY {keys}
