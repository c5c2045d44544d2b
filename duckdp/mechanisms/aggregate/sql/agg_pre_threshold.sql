-- Pre-thresholding of a count selection (docs/specs/private-group-by.md §4.4; Google DP's
-- PreThresholdingPartitionSelection): per key w' = distinct users − $shift ($shift = pre_threshold − 1), keys with
-- w' ≤ 0 dropped before any noise, so they are exactly like absent keys. c ↦ max(c − $shift, 0) is 1-Lipschitz,
-- so one user still moves ≤ Δ0 keys by ≤ 1 and a key appearing has w' = 1 (Gopi et al. journal Thm A.1/A.2 apply).
-- {weights} is stage_weights with exponent 0: _dp_w = distinct users per key of the Δ0-truncated pairs.
-- idents: weights, keys
-- params: shift
SELECT {keys}, _dp_w - $shift AS _dp_w FROM ({weights}) AS w WHERE _dp_w > $shift
