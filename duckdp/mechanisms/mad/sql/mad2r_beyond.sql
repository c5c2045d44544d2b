-- MAD2R's lazy-noise cost rule (duckdp/mechanisms/mad/duckdb.py, `mad2r_lazy`): the stored pairs' count,
-- how many of them lie beyond each user's first $candidates, Σ_u (n_u − m)⁺, summed per pair as 1 − m/n_u
-- over the pairs of users with n_u = `_dp_size` > m (a float: it only picks the faster path), and the
-- largest user's n_u (the heavy-user gate of `noise_late`: it only picks which statements run).
-- idents: pairs
-- params: candidates
SELECT count(*), coalesce(sum(1 - $candidates / _dp_size) FILTER (WHERE _dp_size > $candidates), 0),
       coalesce(max(_dp_size), 0)
FROM {pairs}
