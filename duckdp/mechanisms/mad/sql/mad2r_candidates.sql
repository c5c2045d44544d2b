-- MAD2R with lazy round-1 noise (duckdp/mechanisms/mad/duckdb.py, `noise_late`): each user's first
-- $candidates pairs whose key round 1 has not noised (no row in {support}, the round-1 user vectors
-- whose keys are ∪S̃_u, the keys round 1 noised), in the order of round 2's truncation (`_dp_order`:
-- {order}, the truncation's keyed hash under the same salt, DuckDBStages.truncation_order). Only users
-- over Δ0 have such pairs (a user within Δ0 kept every key in round 1). A per-user top-N, over the users
-- {users} selects (empty, or one user-hash part: DuckDBStages.store_by_user_part). Which of two pairs
-- tied on `_dp_order` at the cut is a candidate does not matter: mad2r_unsettled.sql and mad2r_cuts.sql
-- read only the pairs ordered strictly before the last candidate's hash, all of them candidates.
-- idents: pairs, support, match, order, users
-- params: candidates
SELECT * FROM (
  SELECT *, {order} AS _dp_order
  FROM (SELECT p.* FROM {pairs} AS p ANTI JOIN {support} AS s ON {match}) AS unnoised{users}
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
