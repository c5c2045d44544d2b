-- MAD2R with lazy round-1 noise (duckdp/mechanisms/mad/duckdb.py, `noise_late`): each user's first
-- $candidates pairs whose key round 1 has not noised (no row in {support}, the round-1 user vectors
-- whose keys are ∪S̃_u, the keys round 1 noised), in the order of round 2's truncation (`_dp_order`:
-- {order}, the truncation's keyed hash under the same salt, DuckDBStages.truncation_order). Only users
-- over Δ0 have such pairs (a user within Δ0 kept every key in round 1). A per-user top-N, over the users
-- {users} selects (empty, or one user-hash part: DuckDBStages.store_by_user_part). Which of two pairs
-- tied on `_dp_order` at the cut is a candidate does not matter: mad2r_unsettled.sql settles a user on
-- the pairs strictly before the last candidate's hash (all of them candidates); mad2r_pruned.sql keeps
-- pairs up to and including that hash, so a tied non-candidate may reach round 2 unscreened, and round
-- 2's truncation keeps none of them (its Δ0 pairs lie strictly before).
-- idents: pairs, support, match, order, users
-- params: candidates
SELECT * FROM (
  SELECT *, {order} AS _dp_order
  FROM (SELECT p.* FROM {pairs} AS p ANTI JOIN {support} AS s ON {match}) AS unnoised{users}
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
