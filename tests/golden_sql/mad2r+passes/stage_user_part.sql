-- rendering 1 of 6; binds $nparts=2, $part=0
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT

-- rendering 2 of 6; binds $nparts=2, $part=1
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT

-- rendering 3 of 6; binds $nparts=2, $part=0
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT

-- rendering 4 of 6; binds $nparts=2, $part=1
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT

-- rendering 5 of 6; binds $nparts=2, $part=0
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT

-- rendering 6 of 6; binds $nparts=2, $part=1
WHERE hash(_dp_user) % $nparts::UBIGINT = $part::UBIGINT
