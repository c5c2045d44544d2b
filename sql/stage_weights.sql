-- Stage `weights` (Gopi et al. ICML'20 §1.1; journal App. B): one row per key, the sum over the
-- users who kept it of d^(−exponent), d = the user's kept size: ½ weighted Gaussian, 1 weighted
-- Laplace, 0 counts.
-- idents: kept, keys
-- params: exponent
WITH kept AS (       -- kept (user, key) pairs with d (stage_truncate.sql)
  {kept}
)
SELECT {keys}, sum(pow(_dp_d, -$exponent)) AS _dp_w FROM kept GROUP BY {keys}
