-- The final sequential histogram as (keys, _dp_w) over its support (weight > 0), the input of
-- noise and threshold (Gopi et al. journal Alg. 1 iterates over supp H only).
-- idents: weights, items, keys
-- params:
SELECT {keys}, _dp_w FROM {weights} JOIN {items} USING (_dp_item) WHERE _dp_w > 0
