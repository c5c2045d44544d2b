-- rendering 1 of 1; binds $order_salt=4495534904771661033, $tie_salt=4427371557954821508
SELECT list(_dp_item ORDER BY _dp_n DESC, hash(xor(hash(_dp_k0), $tie_salt)), _dp_item) AS _dp_items
FROM "_duckdp_000000000000_pairs0" JOIN "_duckdp_000000000000_items1" USING (_dp_k0)
GROUP BY _dp_user
ORDER BY hash(xor(hash(_dp_user), $order_salt)), _dp_user
