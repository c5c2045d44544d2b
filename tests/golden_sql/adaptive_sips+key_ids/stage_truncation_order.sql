-- rendering 1 of 5; binds $trunc_salt=4041988694836402461
hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))

-- rendering 2 of 5; binds $trunc_salt=4495534904771661033
hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))

-- rendering 3 of 5; binds $trunc_salt=4495534904771661033
hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))

-- rendering 4 of 5; binds $trunc_salt=4427371557954821508
hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))

-- rendering 5 of 5; binds $trunc_salt=4427371557954821508
hash(xor(hash(_dp_user, _dp_k0), $trunc_salt))
