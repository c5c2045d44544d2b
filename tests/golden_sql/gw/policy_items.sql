-- rendering 1 of 1; binds none
CREATE TEMP TABLE "_duckdp_000000000000_items1" AS
SELECT (row_number() OVER (ORDER BY _dp_k0) - 1)::BIGINT AS _dp_item, _dp_k0
FROM (SELECT DISTINCT _dp_k0 FROM "_duckdp_000000000000_pairs0")
