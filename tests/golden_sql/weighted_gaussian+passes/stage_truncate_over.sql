-- rendering 1 of 1; binds $max_contributions=2
CREATE TEMP TABLE "_duckdp_000000000000_over2" AS
SELECT * FROM "_duckdp_000000000000_sized0" WHERE _dp_size > $max_contributions
