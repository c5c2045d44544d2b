-- rendering 1 of 2; binds $nparts=2, $part=0
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT

-- rendering 2 of 2; binds $nparts=2, $part=1
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT
