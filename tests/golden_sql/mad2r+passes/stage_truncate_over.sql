-- rendering 1 of 2; binds $max_contributions=2
CREATE TEMP TABLE "_duckdp_000000000000_over2" AS
SELECT * FROM "_duckdp_000000000000_pairs0" WHERE _dp_size > $max_contributions

-- rendering 2 of 2; binds $max_contributions=2
CREATE TEMP TABLE "_duckdp_000000000000_over12" AS
SELECT * FROM "_duckdp_000000000000_sized10" WHERE _dp_size > $max_contributions
