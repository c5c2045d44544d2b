-- Stage `truncate`, the keyed hash that orders a user's pairs (Gopi et al. ICML'20 §1.1): of {hashed},
-- (user, key) or the key alone (DuckDBStages.truncation_hashed), under the truncation's fresh salt. The one
-- place it is written: stage_truncate_window.sql ranks by it (ties broken on the key), and a mechanism's
-- stages that must order pairs as a truncation will (lazy noise candidates) compute it through
-- DuckDBStages.truncation_order.
-- idents: hashed
-- params: trunc_salt
hash(xor(hash({hashed}), $trunc_salt))
