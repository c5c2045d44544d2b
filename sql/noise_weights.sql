-- One round's weights materialised with each key's 128-bit PRF counter (duckdp/counters.py), the
-- input of the noise stage (duckdp/noise_stage.py). `_dp_w` may be NULL (keys noised off support).
-- idents: target, weighted, keys, counter_hi, counter_lo
-- params:
CREATE TEMP TABLE {target} AS
SELECT {keys}, _dp_w::DOUBLE AS _dp_w, {counter_hi} AS _dp_chi, {counter_lo} AS _dp_clo
FROM ({weighted})
