-- Adaptive SIPS rounds ≥ 2 with lazy noise (docs/specs/adaptive-sips.md, "Lazy noise"): the open pairs
-- (adaptive_sips_open.sql) whose key no round has noised yet (level NULL there), each with `_dp_order`,
-- the order this round's truncation uses (stage_truncate_window.sql: the same keyed hash of the same
-- columns, {hashed} = DuckDBStages.truncation_hashed(), the same salt). {users}: empty, a filter to one
-- user-hash part (DuckDBStages.store_by_user_part), or to the users whose candidates did not settle R̃_u
-- (adaptive_sips_unsettled.sql).
-- idents: open, hashed, users
-- params: trunc_salt
SELECT *, hash(xor(hash({hashed}), $trunc_salt)) AS _dp_order
FROM (SELECT * EXCLUDE (_dp_level) FROM {open} WHERE _dp_level IS NULL) AS unnoised{users}
