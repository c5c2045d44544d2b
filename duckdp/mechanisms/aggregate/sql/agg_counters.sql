-- Private GROUP BY, the PRF counters (duckdp/counters.py) of the keys of {keyset} in agg_measures.sql's row order
-- (sorted by key), before the metrics are summed: each key's exact noise is a function of (K, measure, counter)
-- only (aggregate_noise.noise), so it is drawn while the engine sums (duckdp/group_by.py); agg_measures.sql's
-- own counters are checked equal to these.
-- idents: keyset, keys, counter_hi, counter_lo
-- params:
SELECT {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo FROM {keyset} AS k ORDER BY {keys}
