-- Adaptive SIPS rounds ≥ 2 with lazy noise (docs/specs/adaptive-sips.md, "Lazy noise"): the open pairs
-- (adaptive_sips_open.sql) whose key no round has noised yet (level NULL there), each with `_dp_order`,
-- the order this round's truncation uses ({order}: its keyed hash under the same salt,
-- DuckDBStages.truncation_order; pairs tied on it are candidates together, adaptive_sips_candidates.sql,
-- and adaptive_sips_unsettled.sql reads only pairs strictly before the last candidate, so how the
-- truncation breaks ties never matters here). {users}: empty, a filter to one user-hash part
-- (DuckDBStages.store_by_user_part), or to the users whose candidates did not settle R̃_u
-- (adaptive_sips_unsettled.sql).
-- idents: open, order, users
-- params:
SELECT *, {order} AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM {open} WHERE _dp_level IS NULL) AS unnoised{users}
