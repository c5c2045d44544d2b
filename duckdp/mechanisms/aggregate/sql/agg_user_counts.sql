-- Private GROUP BY stage 7's input, keys="threshold" (docs/specs/private-group-by.md §4.2, §4.4): per key of
-- the truncated pairs {kept} (≤ Δ0 keys per user, over all keys) c = distinct users − $shift
-- ($shift = pre_threshold − 1), only keys with c ≥ 1, with the key's PRF counter, sorted by key.
-- idents: kept, keys, counter_hi, counter_lo
-- params: shift
SELECT {keys}, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo, _dp_c FROM (
  SELECT {keys}, count(*)::BIGINT - $shift AS _dp_c FROM ({kept}) AS t GROUP BY {keys}
) AS c
WHERE _dp_c >= 1
ORDER BY {keys}
