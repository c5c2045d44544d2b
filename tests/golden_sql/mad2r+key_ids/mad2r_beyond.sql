-- rendering 1 of 1; binds $candidates=69
SELECT count(*), coalesce(sum(1 - $candidates / _dp_size) FILTER (WHERE _dp_size > $candidates), 0),
       coalesce(max(_dp_size), 0)
FROM "_duckdp_000000000000_pairs1"
