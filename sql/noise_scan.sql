-- One round's weights with each key's 128-bit PRF counter (duckdp/counters.py), streamed to the
-- noise stage (duckdp/noise_stage.py) in Arrow batches: keys (as {key_output} names them) first,
-- then `_dp_w` (NULL for keys noised off support), `_dp_chi`, `_dp_clo`. Used where counters are
-- injective (integer keys), so no key shares a counter and every rank is 0.
-- idents: weighted, key_output, counter_hi, counter_lo
-- params:
SELECT {key_output}, _dp_w::DOUBLE AS _dp_w, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo
FROM ({weighted})
