-- rendering 1 of 1; binds none
SELECT _dp_k0, _dp_w FROM "_duckdp_000000000000_weights2" JOIN "_duckdp_000000000000_items1" USING (_dp_item) WHERE _dp_w > 0
