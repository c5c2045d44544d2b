-- Adaptive SIPS with lazy noise, a heavy user's prefix bound for one later round (adaptive_sips_heavy.sql):
-- about $prefix of the user's `_dp_n` pairs have a truncation order (a keyed hash, uniform on [0, 2⁶⁴))
-- below it. Stored once per user and round, so every comparison with it reads the same DOUBLE.
-- idents:
-- params: prefix
$prefix::DOUBLE / _dp_n * 18446744073709551616.0
