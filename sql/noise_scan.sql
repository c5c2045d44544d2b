-- One round's weights with each key's 128-bit PRF counter (duckdp/counters.py), streamed to the
-- noise stage (duckdp/noise_stage.py) in Arrow batches: keys (as {key_output} names them) first,
-- then `_dp_w` (NULL for keys noised off support), and {counters}: `_dp_chi`, `_dp_clo` where the
-- counters are the (injective) HUGEINT/UHUGEINT keys, so no key shares a counter and every rank is 0;
-- nothing where the noise stage computes them: from the key column for integer keys of ≤ 64 bits and
-- key ids (counters.counter_arrays), or as stream positions (other keys, unseeded).
-- idents: weighted, key_output, counters
-- params:
SELECT {key_output}, _dp_w::DOUBLE AS _dp_w{counters}
FROM ({weighted})
