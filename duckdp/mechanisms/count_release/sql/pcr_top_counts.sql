-- Private Count Release input (Rogers 2024, §3 and Alg. 1): the k̄ + 1 largest distinct-user
-- counts, read once. A user changes each count by at most 1 (ℓ∞ sensitivity 1) and may touch
-- any number of keys (no ℓ0 bound). Ties are ordered by a keyed hash, then (where hashes collide) by the
-- key: a fixed secret function of the counts and keys, never the order rows arrive in.
-- idents: source, user, key_select, keys
-- params: top, tie_salt
WITH pairs AS (      -- distinct (user, key) pairs
  SELECT DISTINCT {user} AS _dp_user, {key_select} FROM {source}
), counts AS (       -- distinct users per key
  SELECT {keys}, count(*) AS _dp_count FROM pairs GROUP BY {keys}
)
-- the top k̄ + 1 counts, largest first
SELECT {keys}, _dp_count FROM counts
ORDER BY _dp_count DESC, hash(xor(hash({keys}), $tie_salt)), {keys}
LIMIT $top
