-- MAD2R with lazy round-1 noise (duckdp/mechanisms/mad/duckdb.py, `noise_late`): each user's first
-- $candidates pairs whose key round 1 has not noised (no row in {support}, the round-1 user vectors
-- whose keys are ∪S̃_u, the keys round 1 noised), in the order of round 2's truncation (`_dp_order`:
-- stage_truncate_window.sql's keyed hash of the same columns, {hashed}, under the same salt). Only
-- users over Δ0 have such pairs (a user within Δ0 kept every key in round 1). A per-user top-N, over
-- the users {users} selects (empty, or one user-hash part: DuckDBStages.store_by_user_part).
-- idents: pairs, support, match, hashed, users
-- params: trunc_salt, candidates
SELECT * FROM (
  SELECT *, hash(xor(hash({hashed}), $trunc_salt)) AS _dp_order
  FROM (SELECT p.* FROM {pairs} AS p ANTI JOIN {support} AS s ON {match}) AS unnoised{users}
) AS ordered
QUALIFY row_number() OVER (PARTITION BY _dp_user ORDER BY _dp_order) <= $candidates
