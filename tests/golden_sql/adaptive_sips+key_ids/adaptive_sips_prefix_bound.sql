-- rendering 1 of 2; binds $prefix=70
$prefix::DOUBLE / _dp_n * 18446744073709551616.0

-- rendering 2 of 2; binds $prefix=73
$prefix::DOUBLE / _dp_n * 18446744073709551616.0
