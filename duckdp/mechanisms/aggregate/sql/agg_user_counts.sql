-- Private GROUP BY stage 7's input, keys="threshold" (docs/specs/private-group-by.md §4.2, §4.4): per key of
-- the truncated pairs {kept} (agg_pairs.sql over every row, ≤ Δ0 keys per user) c = distinct users − $shift
-- ($shift = pre_threshold − 1), only keys with c ≥ 1, with the key's PRF counter and the measures of the same
-- kept pairs ({measures}, {coalesced} as in agg_measures.sql), in no particular order (the engine sorts the keys
-- the threshold keeps; a stream of every candidate key sorted would cost a sort of millions of rows): the threshold
-- and the measures read one truncation.
-- idents: kept, keys, counter_hi, counter_lo, measures, coalesced
-- params: shift
WITH per_key AS (
  SELECT {keys}, count(*)::BIGINT - $shift AS _dp_c, {measures} FROM ({kept}) AS t GROUP BY {keys}
)
SELECT {keys}, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo, _dp_c, {coalesced} FROM per_key
WHERE _dp_c >= 1
