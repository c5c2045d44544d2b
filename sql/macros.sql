-- duckdp macros for the DuckDB shell: differentially private partition selection in pure SQL.
--
--   .read duckdp.sql          (write it with `duckdp macros -o duckdp.sql`: it holds a fresh secret)
--   SELECT * FROM duckdp_weighted_gaussian('reviews', 'user_id', 'item', epsilon := 1, delta := 1e-6);
--
-- Table macros (user-level privacy: adding/removing one user with all their rows):
--   duckdp_weighted_gaussian(tbl, user_col, item_col, epsilon|rho, delta, max_contributions := 100,
--                            truncation := 'per_user')   (every macro that truncates users to Δ0 takes it)
--   duckdp_count_gaussian(...)       same arguments; counts, noise scaled by √Δ0
--   duckdp_dpsips(..., iterations := 3, ratio := 1/3)   DP-SIPS Alg. 3
--   duckdp_adaptive_sips(..., iterations := 3, ratio := 1/3, a_drop := -0.5, a_full := 0.5, beta_min := 0.5)
--   duckdp_mad(..., adaptive_excess := 3, adaptive_min_degree := 2, max_adaptive_degree := Δ0)   MAD
--   duckdp_plan(epsilon|rho, delta, max_contributions, …)   σ and threshold per round, no data read
--   duckdp_sips_plan(epsilon|rho, delta, max_contributions, iterations, ratio, beta_min)   the SIPS rounds' plan
--   duckdp_auto_contributions(tbl, user_col, item_col, epsilon|rho, delta, share := 0.005)  a private Δ0
--                                    and the budget left for the mechanism (max_contributions 'auto', below)
-- Each returns one column, named like `item_col`, holding the released keys sorted by key (so the
-- order is a function of the released set only, never of unreleased keys or thread scheduling).
-- `tbl` is a table or view name (optionally schema-qualified) or a file DuckDB can scan, such as
-- 'reviews.parquet'; it is read through query_table() and never written. `user_col` and `item_col` (one key column)
-- are matched to the input's columns by name, case-insensitively, and never spliced into SQL text;
-- a name that matches no column fails with DuckDB's `Could not find key "x" in struct`. Input
-- columns must not start with `_dp_`; rows with a NULL user or item are refused. A FLOAT/DOUBLE key is released
-- in one form (−0.0 as 0.0, one NaN); a string key under a collation is refused (duckdp_pairs).
-- `truncation :=` is duckdp.select's: the order a user over Δ0 keeps keys in, 'per_user' (default: a
-- uniform Δ0-subset per user) or 'global' (one secret order of the keys for every user, fresh per round).
-- Give exactly one of `epsilon :=` ((ε, δ)-DP) or `rho :=` (δ-approximate ρ-zCDP), and `delta :=`.
-- Scalar macros: duckdp_ndtr (Φ), duckdp_ndtri (Φ⁻¹), duckdp_erf, duckdp_expm1, duckdp_log1p,
-- duckdp_zcdp_sigma, duckdp_analytic_gaussian_sigma, duckdp_gaussian_threshold.
--
-- RANDOMNESS — A KEYED PRF. Every noise value and the truncation order are SHA-256 of this file's
-- secret (duckdp_secret(), 256 bits from os.urandom written by `duckdp macros`; keep the file
-- private: `duckdp macros -o duckdp.sql` creates it mode 0600) followed by a fixed-length message:
-- salt ‖ key id for noise, salt ‖ hash(user, key) (or hash(key): 'global') for truncation. Each call draws a fresh nonce
-- (uuid(), the transaction time and a sequence), and the salts of its rounds are PRF values of
-- (nonce, round, purpose), so calls never share noise. DuckDB's random(), uuid() and hash() only make
-- the inputs distinct; none of them is relied on for secrecy, and setseed() does not make runs
-- reproducible. `duckdp macros --test-key N` (or duckdp.install_macros(con, seed=N)) writes the
-- documented, public key of test N instead: with it, setseed() makes runs reproducible, the
-- releases are NOT private, and every table macro's result carries `duckdp_seeded = true`.
--
-- The privacy calibration (σ and thresholds) is computed here in SQL and equals duckdp's Python
-- calibration (duckdp.privacy.calibration) to 1e-9 relative; duckdp's tests check this.


-- ---------------------------------------------------------------------------------------------
-- Scalar math. DuckDB has no erf, Φ, Φ⁻¹, expm1 or log1p; these match scipy to ≤ 1e-12 relative.
-- ---------------------------------------------------------------------------------------------

-- (Macros below evaluate their argument once via list_transform([arg], lambda v: …)[1]: a macro
-- argument is substituted at every use, which would multiply the expression size when nested.)

-- log(1 + x), stable for small x (Goldberg 1991, Thm 4: log(u)·x/(u − 1) with u = 1 + x).
CREATE OR REPLACE TEMP MACRO duckdp_log1p(x) AS list_transform([x::DOUBLE], lambda v:
  CASE WHEN 1.0e0 + v = 1.0e0 THEN v ELSE ln(1.0e0 + v) * v / ((1.0e0 + v) - 1.0e0) END)[1];

-- exp(x) − 1, stable for small x (Kahan: (u − 1)·x/log(u) with u = exp(x)).
CREATE OR REPLACE TEMP MACRO duckdp_expm1(x) AS list_transform([x::DOUBLE], lambda v:
  CASE WHEN exp(v) = 1.0e0 THEN v WHEN exp(v) - 1.0e0 = -1.0e0 THEN -1.0e0
       ELSE (exp(v) - 1.0e0) * v / ln(exp(v)) END)[1];

-- Φ(x) − ½ for |x| ≤ 0.67448975 (Cody 1993, ACM TOMS Alg. 715, as in R's pnorm).
CREATE OR REPLACE TEMP MACRO duckdp_ndtr_center(x) AS list_transform([x::DOUBLE], lambda v:
  v * ((((0.065682337918207449113e0 * v * v + 2.2352520354606839287e0) * v * v
      + 161.02823106855587881e0) * v * v + 1067.6894854603709582e0) * v * v + 18154.981253343561249e0)
    / ((((v * v + 47.20258190468824187e0) * v * v + 976.09855173777669322e0) * v * v
      + 10260.932208618978205e0) * v * v + 45507.789335026729956e0))[1];

-- Φ(−y) for y ≥ 0.67448975 (Cody 1993, Alg. 715; exp split at y rounded to 1/16 for accuracy).
CREATE OR REPLACE TEMP MACRO duckdp_ndtr_upper(y) AS list_transform([y::DOUBLE], lambda v:
  exp(-0.5e0 * (trunc(v * 16) / 16) * (trunc(v * 16) / 16))
  * exp(-0.5e0 * (v - trunc(v * 16) / 16) * (v + trunc(v * 16) / 16))
  * CASE WHEN v <= 5.656854249492380195206754896838e0 THEN
      ((((((((1.0765576773720192317e-8 * v + 0.39894151208813466764e0) * v + 8.8831497943883759412e0) * v
        + 93.506656132177855979e0) * v + 597.27027639480026226e0) * v + 2494.5375852903726711e0) * v
        + 6848.1904505362823326e0) * v + 11602.651437647350124e0) * v + 9842.7148383839780218e0)
      / ((((((((v + 22.266688044328115691e0) * v + 235.38790178262499861e0) * v + 1519.377599407554805e0) * v
        + 6485.558298266760755e0) * v + 18615.571640885098091e0) * v + 34900.952721145977266e0) * v
        + 38912.003286093271411e0) * v + 19685.429676859990727e0)
    ELSE
      (0.398942280401432677939946059934e0
        - (1.0e0 / (v * v)) * (((((0.02307344176494017303e0 / (v * v) + 0.21589853405795699e0) / (v * v)
            + 0.1274011611602473639e0) / (v * v) + 0.022235277870649807e0) / (v * v)
            + 0.001421619193227893466e0) / (v * v) + 2.9112874951168792e-5)
          / (((((1.0e0 / (v * v) + 1.28426009614491121e0) / (v * v) + 0.468238212480865118e0) / (v * v)
            + 0.0659881378689285515e0) / (v * v) + 0.00378239633202758244e0) / (v * v) + 7.29751555083966205e-5)
      ) / v
    END)[1];

-- Φ(x), the standard normal CDF, with full relative accuracy in both tails (Cody 1993).
CREATE OR REPLACE TEMP MACRO duckdp_ndtr(x) AS list_transform([x::DOUBLE], lambda v:
  CASE WHEN abs(v) <= 0.67448975e0 THEN 0.5e0 + duckdp_ndtr_center(v)
       WHEN v < 0 THEN duckdp_ndtr_upper(-v)
       ELSE 1.0e0 - duckdp_ndtr_upper(v) END)[1];

-- erf(x) = 2Φ(x√2) − 1, evaluated without cancellation near 0.
CREATE OR REPLACE TEMP MACRO duckdp_erf(x) AS list_transform([x::DOUBLE * 1.4142135623730951e0], lambda v:
  CASE WHEN abs(v) <= 0.67448975e0 THEN 2.0e0 * duckdp_ndtr_center(v)
       ELSE sign(v) * (1.0e0 - 2.0e0 * duckdp_ndtr_upper(abs(v))) END)[1];

-- AS 241's tail branch: |Φ⁻¹(p)| as a function of r = √(−log min(p, 1 − p)) > 1.3.
CREATE OR REPLACE TEMP MACRO duckdp_ndtri_tail(r) AS list_transform([r::DOUBLE], lambda v:
  CASE WHEN v <= 5.0e0 THEN
    (((((((7.74545014278341407640e-4 * (v - 1.6e0) + 2.27238449892691845833e-2) * (v - 1.6e0)
      + 2.41780725177450611770e-1) * (v - 1.6e0) + 1.27045825245236838258e0) * (v - 1.6e0)
      + 3.64784832476320460504e0) * (v - 1.6e0) + 5.76949722146069140550e0) * (v - 1.6e0)
      + 4.63033784615654529590e0) * (v - 1.6e0) + 1.42343711074968357734e0)
    / (((((((1.05075007164441684324e-9 * (v - 1.6e0) + 5.47593808499534494600e-4) * (v - 1.6e0)
      + 1.51986665636164571966e-2) * (v - 1.6e0) + 1.48103976427480074590e-1) * (v - 1.6e0)
      + 6.89767334985100004550e-1) * (v - 1.6e0) + 1.67638483018380384940e0) * (v - 1.6e0)
      + 2.05319162663775882187e0) * (v - 1.6e0) + 1.0e0)
  ELSE
    (((((((2.01033439929228813265e-7 * (v - 5.0e0) + 2.71155556874348757815e-5) * (v - 5.0e0)
      + 1.24266094738807843860e-3) * (v - 5.0e0) + 2.65321895265761230930e-2) * (v - 5.0e0)
      + 2.96560571828504891230e-1) * (v - 5.0e0) + 1.78482653991729133580e0) * (v - 5.0e0)
      + 5.46378491116411436990e0) * (v - 5.0e0) + 6.65790464350110377720e0)
    / (((((((2.04426310338993978564e-15 * (v - 5.0e0) + 1.42151175831644588870e-7) * (v - 5.0e0)
      + 1.84631831751005468180e-5) * (v - 5.0e0) + 7.86869131145613259100e-4) * (v - 5.0e0)
      + 1.48753612908506148525e-2) * (v - 5.0e0) + 1.36929880922735805310e-1) * (v - 5.0e0)
      + 5.99832206555887937690e-1) * (v - 5.0e0) + 1.0e0)
  END)[1];

-- Φ⁻¹(p) for p in (0, 1) (Wichura 1988, Algorithm AS 241, PPND16: about 1e-16 relative).
CREATE OR REPLACE TEMP MACRO duckdp_ndtri(p) AS list_transform([p::DOUBLE], lambda u:
  CASE WHEN NOT (u > 0 AND u < 1) THEN error('duckdp_ndtri: p must be in (0, 1)')::DOUBLE
       WHEN abs(u - 0.5e0) <= 0.425e0 THEN list_transform([u - 0.5e0], lambda q: list_transform([0.180625e0 - q * q], lambda r:
    q * (((((((2509.0809287301226727e0 * r + 33430.575583588128105e0) * r + 67265.770927008700853e0) * r
      + 45921.953931549871457e0) * r + 13731.693765509461125e0) * r + 1971.5909503065514427e0) * r
      + 133.14166789178437745e0) * r + 3.3871328727963666080e0)
    / (((((((5226.4952788528545610e0 * r + 28729.085735721942674e0) * r + 39307.895800092710610e0) * r
      + 21213.794301586595867e0) * r + 5394.1960214247511077e0) * r + 687.18700749205790830e0) * r
      + 42.313330701600911252e0) * r + 1.0e0))[1])[1]
  ELSE sign(u - 0.5e0) * duckdp_ndtri_tail(sqrt(-ln(least(u, 1.0e0 - u)))) END)[1];

-- ---------------------------------------------------------------------------------------------
-- Keyed randomness. The secret is 64 hex characters, exactly one SHA-256 block, so
-- sha256(secret ‖ m) = f(f(IV, secret), pad(m)) is the cascade construction keyed by the secret
-- chaining value; every message below is shorter than 56 bytes and of a fixed length per leading
-- domain letter (a prefix-free set), on which the cascade is a PRF if SHA-256's compression
-- function is (Bellare, Canetti & Krawczyk, FOCS 1996, Thm 3.1; the assumption behind HMAC).
-- ---------------------------------------------------------------------------------------------

-- <duckdp:key> rendered by `duckdp macros` / duckdp.install_macros (this line fails unrendered)
CREATE OR REPLACE TEMP MACRO duckdp_secret() AS __DUCKDP_SECRET__;
CREATE OR REPLACE TEMP MACRO duckdp_seeded() AS __DUCKDP_SEEDED__;
-- </duckdp:key>

-- v as 16 upper-case hex digits (a fixed-length field of a PRF message).
CREATE OR REPLACE TEMP MACRO duckdp_hex64(v) AS lpad(to_hex(v::UBIGINT), 16, '0');

-- The PRF: the first 64 bits of sha256(secret ‖ msg), as a UBIGINT.
CREATE OR REPLACE TEMP MACRO duckdp_prf(msg) AS ('0x' || left(sha256(duckdp_secret() || msg), 16))::UBIGINT;

-- U(0, 1) from a 64-bit word v: m = v >> 12 (52 bits), u = (2m + 1)·2⁻⁵³. 2m + 1 < 2⁵³ is exact in
-- a double, so u is exact, lies in [2⁻⁵³, 1 − 2⁻⁵³] (never 0 or 1) and the grid is symmetric
-- (1 − u is on it), so the normal's tails stop at ±8.29σ alike.
CREATE OR REPLACE TEMP MACRO duckdp_word_uniform(word) AS
  ((word::UBIGINT >> 12) * 2 + 1)::DOUBLE * 1.1102230246251565e-16;

-- A call's nonce: distinct per call (uuid(), the transaction's start in µs, a session counter). Only
-- its uniqueness matters; the secret keeps the salts unpredictable. With a test key only uuid()
-- is used, so setseed() reproduces runs. Volatile: call it only in a one-row MATERIALIZED CTE.
CREATE TEMP SEQUENCE IF NOT EXISTS duckdp_nonce_counter;
CREATE OR REPLACE TEMP MACRO duckdp_nonce() AS
  ('0x' || left(sha256(uuid()::VARCHAR || CASE WHEN duckdp_seeded() THEN ''
                                                ELSE ':' || epoch_us(now()) || ':' || nextval('duckdp_nonce_counter') END),
                16))::UBIGINT;

-- The salt of a call's round `round` for `purpose` ('t' truncation, 'n' noise): a PRF value.
CREATE OR REPLACE TEMP MACRO duckdp_salt(nonce, round, purpose) AS
  duckdp_prf('S' || duckdp_hex64(nonce) || duckdp_hex64(round) || purpose);

-- value + scale·N(0, 1), the normal by inversion of the PRF uniform of (salt, key id): key ids are
-- distinct within a round (ranks), so distinct keys get distinct messages and independent noise.
CREATE OR REPLACE TEMP MACRO duckdp_gaussian_noise(value, scale, salt, key_id) AS
  value::DOUBLE + scale::DOUBLE
    * duckdp_ndtri(duckdp_word_uniform(duckdp_prf('N' || duckdp_hex64(salt) || duckdp_hex64(key_id))));

-- ---------------------------------------------------------------------------------------------
-- Privacy calibration. Every σ and threshold is rounded up by 1e-12 relative, like duckdp's
-- Python calibration (a larger σ or threshold is always still private).
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE TEMP MACRO duckdp_round_up(x) AS x::DOUBLE + abs(x::DOUBLE) * 1e-12;

-- σ = Δ/√(2ρ): the Gaussian mechanism is ρ-zCDP (Bun & Steinke 2016, Prop. 1.6).
CREATE OR REPLACE TEMP MACRO duckdp_zcdp_sigma(rho, sensitivity := 1) AS
  CASE WHEN NOT rho::DOUBLE > 0 THEN error('duckdp: rho must be > 0')::DOUBLE
       ELSE duckdp_round_up(sensitivity::DOUBLE / sqrt(2.0e0 * rho::DOUBLE)) END;

-- δ(σ) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) of N(0, σ²) at ε (Balle & Wang 2018, Thm 8).
CREATE OR REPLACE TEMP MACRO duckdp_analytic_gaussian_delta(sigma, epsilon, sensitivity := 1) AS
  duckdp_ndtr(sensitivity::DOUBLE / (2 * sigma::DOUBLE) - epsilon::DOUBLE * sigma::DOUBLE / sensitivity::DOUBLE)
  - exp(epsilon::DOUBLE)
    * duckdp_ndtr(-sensitivity::DOUBLE / (2 * sigma::DOUBLE) - epsilon::DOUBLE * sigma::DOUBLE / sensitivity::DOUBLE);

-- Smallest σ with δ(σ) ≤ δ (Balle & Wang 2018, Thm 8): δ(σ) decreases in σ, so 64 fixed
-- bisection steps on log σ over [1e-6Δ, 1e12Δ] (a list_reduce, one per row) reach adjacent
-- doubles; the upper end, which satisfies the condition, is returned rounded up.
CREATE OR REPLACE TEMP MACRO duckdp_analytic_gaussian_sigma(epsilon, delta, sensitivity := 1) AS
  CASE WHEN NOT (epsilon::DOUBLE > 0 AND delta::DOUBLE > 0 AND delta::DOUBLE < 1 AND sensitivity::DOUBLE > 0)
         THEN error('duckdp: the analytic Gaussian needs epsilon > 0, delta in (0, 1), sensitivity > 0')::DOUBLE
       ELSE duckdp_round_up(list_reduce(
         list_transform(range(64), lambda i: [0.0e0, 0.0e0]),
         lambda bracket, step:
           CASE WHEN duckdp_analytic_gaussian_delta(sqrt(bracket[1] * bracket[2]), epsilon, sensitivity) > delta::DOUBLE
                THEN [sqrt(bracket[1] * bracket[2]), bracket[2]]
                ELSE [bracket[1], sqrt(bracket[1] * bracket[2])] END,
         [1e-6 * sensitivity::DOUBLE, 1e12 * sensitivity::DOUBLE])[2]) END;

-- q_k = 1 − (1 − δ)^{1/k} = −expm1(log1p(−δ)/k), the per-item tail for k novel items.
CREATE OR REPLACE TEMP MACRO duckdp_per_item_tail(delta, k) AS
  -duckdp_expm1(duckdp_log1p(-delta::DOUBLE) / k::DOUBLE);

-- T = max_{k≤Δ0} [ρ(k) + σΦ⁻¹((1−δ)^{1/k})] with ρ(k) = c·k^(−e) (Gopi et al. 2020 Thm 5.1;
-- DP-SIPS Alg. 2). Weighted: c = 1, e = ½; counts: c = 1, e = 0 (journal Thm A.2).
-- `delta` is the share of δ for novel items: δ/2 under (ε, δ)-DP, δ under approximate zCDP.
CREATE OR REPLACE TEMP MACRO duckdp_gaussian_threshold(sigma, delta, max_contributions,
                                                       novelty_scale := 1, novelty_exponent := 0.5) AS
  CASE WHEN NOT (sigma::DOUBLE > 0 AND delta::DOUBLE > 0 AND delta::DOUBLE < 1)
         THEN error('duckdp: threshold needs sigma > 0 and delta in (0, 1)')::DOUBLE
       WHEN NOT (max_contributions::DOUBLE >= 1 AND max_contributions::DOUBLE <= 1000000
                 AND max_contributions::DOUBLE = floor(max_contributions::DOUBLE))
         THEN error('duckdp: max_contributions must be an integer in [1, 1000000] in the shell macros')::DOUBLE
       ELSE duckdp_round_up(list_max(list_transform(range(1, max_contributions::BIGINT + 1), lambda k:
         novelty_scale::DOUBLE * pow(k::DOUBLE, -novelty_exponent::DOUBLE)
         - sigma::DOUBLE * duckdp_ndtri(duckdp_per_item_tail(delta, k))))) END;

-- Every round's budget, σ and threshold, computed before any data is read. `shares` splits the
-- budget across rounds (each share of ε or ρ and of δ). Per round:
--   (ε, δ): the rounds' Gaussians are composed exactly: jointly μ-GDP (Dong, Roth & Su 2022,
--           Cor. 3.3) with 1/μ the analytic-Gaussian σ at (ε, δ/2) (Balle & Wang 2018 Thm 8; Dong
--           et al. Cor. 2.13), round j's σ_j = Δ/(μ√share_j); T with δ·share_j/2 (Gopi et al. 2020,
--           Thm 5.1). One round: σ from the analytic Gaussian at (ε, δ/2).
--   zCDP:   σ = Δ/√(2ρ·share_j), T with δ·share_j (DP-SIPS Alg. 2, Thm 13, 14).
-- SELECT * FROM duckdp_plan(epsilon := 1, delta := 1e-5, max_contributions := 100);
CREATE OR REPLACE TEMP MACRO duckdp_plan(epsilon := NULL, rho := NULL, delta := NULL, max_contributions := 100,
                                         shares := [1.0e0], sensitivity := 1, novelty_scale := 1,
                                         novelty_exponent := 0.5, novelty_scales := NULL) AS TABLE
WITH checked AS (    -- the budget arguments, refused unless exactly one of epsilon/rho and a delta
  SELECT CASE WHEN (epsilon IS NULL) = (rho IS NULL)
                THEN error('duckdp: give exactly one of epsilon := (for (ε, δ)-DP) or rho := (for zCDP)')
              WHEN delta IS NULL THEN error('duckdp: delta := is required (partition selection cannot be pure DP)')
              WHEN NOT (coalesce(epsilon, rho)::DOUBLE > 0 AND coalesce(epsilon, rho)::DOUBLE < 'infinity'::DOUBLE)
                THEN error('duckdp: epsilon/rho must be a finite number > 0')
              WHEN NOT (delta::DOUBLE > 0 AND delta::DOUBLE < 1) THEN error('duckdp: delta must be in (0, 1)')
              WHEN NOT (max_contributions::DOUBLE >= 1 AND max_contributions::DOUBLE <= 1000000
                        AND max_contributions::DOUBLE = floor(max_contributions::DOUBLE))
                THEN error('duckdp: max_contributions must be an integer in [1, 1000000] in the shell macros '
                           '(their thresholds scan every k <= max_contributions; duckdp.select plans up to 1e15)')
              WHEN delta::DOUBLE < __DUCKDP_MIN_DELTA__    -- duckdp.privacy.budget.MIN_DELTA
                THEN error('duckdp: delta must be >= __DUCKDP_MIN_DELTA__ (the noise sampler''s resolution)')
              ELSE true END AS _dp_ok
), budgets AS (      -- one row per round with its share of the budget
  SELECT generate_subscripts(shares, 1) - 1 AS _dp_round, unnest(shares)::DOUBLE AS _dp_share
  FROM checked WHERE _dp_ok
), joint AS (       -- (ε, δ): 1/μ, the σ of all rounds together, at (ε, δ/2)
  SELECT CASE WHEN epsilon IS NOT NULL
              THEN duckdp_analytic_gaussian_sigma(epsilon::DOUBLE, delta::DOUBLE / 2, sensitivity) END AS _dp_joint
  FROM checked WHERE _dp_ok
), calibrated AS (   -- σ per round; novel items get δ/2 under (ε, δ), δ under zCDP
  SELECT _dp_round, epsilon::DOUBLE * _dp_share AS _dp_eps, rho::DOUBLE * _dp_share AS _dp_rho,
         delta::DOUBLE * _dp_share AS _dp_delta,
         CASE WHEN epsilon IS NULL THEN duckdp_zcdp_sigma(rho::DOUBLE * _dp_share, sensitivity)
              WHEN _dp_share = 1 THEN _dp_joint
              ELSE duckdp_round_up(_dp_joint / sqrt(_dp_share)) END AS _dp_sigma,
         CASE WHEN epsilon IS NOT NULL THEN delta::DOUBLE * _dp_share / 2 ELSE delta::DOUBLE * _dp_share END AS _dp_novel
  FROM budgets, joint
)
SELECT _dp_round AS round, _dp_eps AS epsilon, _dp_rho AS rho, _dp_delta AS delta, _dp_sigma AS sigma,
       duckdp_gaussian_threshold(_dp_sigma, _dp_novel, max_contributions,
                                 coalesce((novelty_scales::DOUBLE[])[_dp_round + 1], novelty_scale), novelty_exponent) AS threshold
FROM calibrated ORDER BY _dp_round;

-- ---------------------------------------------------------------------------------------------
-- Table macros: weight → noise → threshold. Internal columns start with `_dp_`. Truncation keeps
-- each user's Δ0 keys of smallest PRF value (a uniform subset, fixed given the salt; 'global': the
-- first Δ0 in one order of the keys).
-- ---------------------------------------------------------------------------------------------

-- `truncation :=` checked once per call, in the macro's plan (no data read): 'per_user' or 'global'.
CREATE OR REPLACE TEMP MACRO duckdp_truncation(truncation) AS
  CASE WHEN truncation IN ('per_user', 'global') THEN truncation::VARCHAR
       ELSE error('duckdp: truncation must be ''per_user'' or ''global'' (the order a user over Δ0 keeps keys in)')
  END;

-- The truncation order, shared by every table macro: a PRF value of (salt, hash(user, key)) —
-- 'global': of (salt, hash(key)), one order of the keys for every user (docs/specs/private-group-by.md
-- §7) — unpredictable without the secret. hash() only shortens its input; callers break ties (two keys
-- with equal hashes) by the key itself, so the kept subset is a function of the user's own keys and
-- the salt under either order, which is all the mechanisms' sensitivity bounds use (spec §7).
CREATE OR REPLACE TEMP MACRO duckdp_trunc_order(user_id, item, salt, truncation := 'per_user') AS
  duckdp_prf('T' || duckdp_hex64(salt)
             || duckdp_hex64(CASE WHEN truncation = 'global' THEN hash(item) ELSE hash(user_id, item) END));

-- A pair's rank among its user's `size` pairs in truncation order (ties by the key): the truncation
-- window, written once; every table macro keeps the pairs of rank ≤ Δ0. A user with size ≤ Δ0
-- keeps every pair whatever the order, so the PRF is computed only for users over Δ0.
CREATE OR REPLACE TEMP MACRO duckdp_trunc_rank(user_id, item, salt, size, max_contributions,
                                               truncation := 'per_user') AS
  row_number() OVER (PARTITION BY user_id ORDER BY CASE WHEN size > max_contributions
                                                        THEN duckdp_trunc_order(user_id, item, salt,
                                                                                truncation := truncation) END, item);

-- A key in one form per group: a FLOAT or DOUBLE key with −0.0 as 0.0 and every NaN as the one NaN, so a
-- released key never shows the form of whichever row its GROUP BY met first — a form another user's row
-- would decide. Other values and types as they are. Written for any key type: TRY_CAST binds for every type
-- (NULL where no cast exists), and cast_to_type gives a constant the key's own type.
CREATE OR REPLACE TEMP MACRO duckdp_canonical_key(x) AS
  CASE WHEN typeof(x) IN ('FLOAT', 'DOUBLE') AND TRY_CAST(x AS DOUBLE) = 0 THEN cast_to_type('0', x)
       WHEN typeof(x) IN ('FLOAT', 'DOUBLE') AND isnan(TRY_CAST(x AS DOUBLE)) THEN cast_to_type('NaN', x)
       ELSE x END;

-- Whether a VARCHAR key compares strings under a collation (a column's COLLATE NOCASE / NOACCENT / NFC or an
-- ICU locale, or the connection's default_collation): probes of pairs of distinct strings that those
-- collations hold equal (A/a, e/é, é composed/decomposed, a/a + soft hyphen), cast to the key's type. A function of the column's type only, never of its rows.
-- Such a GROUP BY would release each group's first row's spelling ('A' or 'a'): refused in duckdp_pairs.
CREATE OR REPLACE TEMP MACRO duckdp_collated(x) AS
  CASE WHEN typeof(x) = 'VARCHAR'    -- the probes only there (casting 'A' to another type could fail)
       THEN cast_to_type('A', x) = cast_to_type('a', x) OR cast_to_type('e', x) = cast_to_type(chr(233), x)
            OR cast_to_type(chr(233), x) = cast_to_type('e' || chr(769), x)
            OR cast_to_type('a', x) = cast_to_type('a' || chr(173), x)
       ELSE false END;

-- Distinct (user, key) pairs of `tbl`, the key twice: as _dp_item and under its own name (for the
-- output), both canonical (duckdp_canonical_key). Columns are matched by name, never spliced into SQL;
-- NULL users/items and collated string keys are refused.
-- The inner query reads user and key as fields of the row (struct_extract, case-insensitive), so a
-- name that matches no column fails while binding with `Could not find key "name" in struct`,
-- naming it, before the outer COLUMNS(...) could fail with "empty set of columns".
CREATE OR REPLACE TEMP MACRO duckdp_pairs(tbl, user_col, item_col) AS TABLE
SELECT * FROM (
  SELECT DISTINCT _dp_user, _dp_item, duckdp_canonical_key(COLUMNS(lambda c: lower(c) = lower(item_col)))
  FROM (SELECT *, struct_extract(_dp_row, user_col) AS _dp_user,
               duckdp_canonical_key(struct_extract(_dp_row, item_col)) AS _dp_item
        FROM query_table(tbl) AS _dp_row))
WHERE CASE WHEN lower(user_col) = lower(item_col) THEN error('duckdp: user_col and item_col must be distinct columns')
           WHEN duckdp_collated(_dp_item)
             THEN error('duckdp: the key column compares strings under a collation (COLLATE NOCASE, NOACCENT, '
                        || 'an ICU locale or default_collation), which would release each group''s first row''s '
                        || 'spelling; read it through a view with the key as <key> COLLATE "binary"')
           WHEN _dp_user IS NULL OR _dp_item IS NULL
             THEN error('duckdp: NULL user ids or items in the input; filter or fill them first')
           ELSE true END;

-- One weight-and-threshold round over `pairs_tbl` (Gopi et al. 2020 §1.1): each user keeps Δ0 keys
-- and adds least(|W_u|, Δ0)^(−weight_exponent) to each; noise N(0, σ²); keys with noisy weight ≥ T.
CREATE OR REPLACE TEMP MACRO duckdp_basic(tbl, user_col, item_col, epsilon, rho, delta, max_contributions,
                                          weight_exponent, sensitivity, novelty_exponent, truncation) AS TABLE
WITH plan AS MATERIALIZED (      -- σ and T (no data read) and this run's salts, drawn once
  SELECT sigma, threshold, duckdp_salt(nonce, 0, 't') AS _dp_trunc_salt, duckdp_salt(nonce, 0, 'n') AS _dp_noise_salt,
         duckdp_truncation(truncation) AS _dp_truncation
  FROM (SELECT duckdp_nonce() AS nonce), duckdp_plan(epsilon := epsilon, rho := rho, delta := delta, max_contributions := max_contributions,
                   sensitivity := sensitivity, novelty_exponent := novelty_exponent)
), ranked AS (       -- each user's keys in salted-hash order, with the user's distinct-key count
  SELECT sized.*, duckdp_trunc_rank(_dp_user, _dp_item, plan._dp_trunc_salt, _dp_size, max_contributions,
                                    truncation := plan._dp_truncation) AS _dp_rank
  FROM (SELECT pairs.*, count(*) OVER (PARTITION BY _dp_user) AS _dp_size
        FROM duckdp_pairs(tbl, user_col, item_col) AS pairs) AS sized, plan
), weighted AS (     -- per-key weight sums over the kept pairs
  SELECT * EXCLUDE (_dp_user, _dp_rank, _dp_size),
         sum(pow(least(_dp_size, max_contributions), -weight_exponent)) AS _dp_w
  FROM ranked WHERE _dp_rank <= max_contributions GROUP BY ALL
), released AS (     -- keys whose weight plus fresh noise (keyed by the key's salted hash) clears T
  SELECT weighted.* FROM (SELECT *, row_number() OVER (ORDER BY _dp_item) AS _dp_key_id FROM weighted) AS weighted, plan
  WHERE duckdp_gaussian_noise(_dp_w, plan.sigma, plan._dp_noise_salt, _dp_key_id::UBIGINT) >= plan.threshold
)
SELECT * EXCLUDE (_dp_item, _dp_w, _dp_key_id) __DUCKDP_SEEDED_COLUMN__ FROM released ORDER BY _dp_item;

-- Weighted Gaussian: weight 1/√|W̄_u|, ℓ2 sensitivity 1, ρ(k) = 1/√k (Gopi et al. 2020 Thm 5.1;
-- zCDP: DP-SIPS Alg. 2, Thm 13).
CREATE OR REPLACE TEMP MACRO duckdp_weighted_gaussian(tbl, user_col, item_col, epsilon := NULL, rho := NULL,
                                                      delta := NULL, max_contributions := 100,
                                                      truncation := 'per_user') AS TABLE
SELECT * FROM duckdp_basic(tbl, user_col, item_col, epsilon, rho, delta, max_contributions, 0.5, 1, 0.5, truncation);

-- Count Gaussian: weight 1, ℓ2 sensitivity √Δ0, ρ(k) = 1 (Gopi et al. 2020 §1.1, journal Thm A.2).
CREATE OR REPLACE TEMP MACRO duckdp_count_gaussian(tbl, user_col, item_col, epsilon := NULL, rho := NULL,
                                                   delta := NULL, max_contributions := 100,
                                                   truncation := 'per_user') AS TABLE
SELECT * FROM duckdp_basic(tbl, user_col, item_col, epsilon, rho, delta, max_contributions, 0.0,
                           sqrt(max_contributions::DOUBLE), 0.0, truncation);

-- DP-SIPS and adaptive SIPS: I rounds of one round, chained by a recursive CTE (duckdp_sips).
-- Round j's share of the budget is r^{I−j−1}(1−r)/(1−r^I), 1/I when r = 1 (DP-SIPS Alg. 3,
-- lines 3–6), evaluated like duckdp.mechanisms.dpsips.round_shares: r^{I−j−1}/Σ r^i in log space.
CREATE OR REPLACE TEMP MACRO duckdp_sips_shares(ratio, iterations := 3) AS
  CASE WHEN NOT (iterations::DOUBLE >= 1 AND iterations::DOUBLE <= 1000 AND iterations::DOUBLE = floor(iterations::DOUBLE))
         THEN error('duckdp: iterations must be an integer in [1, 1000]')::DOUBLE[]
       WHEN NOT (ratio::DOUBLE > 0 AND ratio::DOUBLE < 'infinity'::DOUBLE)
         THEN error('duckdp: ratio must be a finite number > 0')::DOUBLE[]
       ELSE list_transform([list_transform(range(iterations::BIGINT), lambda j:
              exp((iterations::BIGINT - 1 - j) * ln(ratio::DOUBLE) - greatest((iterations::BIGINT - 1) * ln(ratio::DOUBLE), 0)))],
            lambda w: CASE WHEN list_min(w) / list_sum(w) > 0 THEN list_transform(w, lambda x: x / list_sum(w))
                           ELSE error('duckdp: ratio leaves a round with no budget')::DOUBLE[] END)[1] END;

-- Every round's budget, σ_j, T_j and cap c_j, no data read (duckdp.mechanisms: DPSIPS.plan for
-- beta_min = 1, AdaptiveSIPS.plan otherwise). c_j = 1 in round 0 and 1/β_min later (novel
-- sensitivity c_j/√k: Gopi et al. 2020 Thm 5.1; docs/specs/adaptive-sips.md, privacy step 2).
CREATE OR REPLACE TEMP MACRO duckdp_sips_plan(epsilon := NULL, rho := NULL, delta := NULL, max_contributions := 100,
                                              iterations := 3, ratio := 1 / 3, beta_min := 1) AS TABLE
SELECT *, CASE WHEN round = 0 THEN 1.0e0 ELSE 1 / beta_min::DOUBLE END AS cap
FROM duckdp_plan(epsilon := epsilon, rho := rho, delta := delta, max_contributions := max_contributions,
                 shares := duckdp_sips_shares(ratio, iterations),
                 novelty_scales := CASE WHEN NOT (beta_min::DOUBLE > 0 AND beta_min::DOUBLE <= 1)
                                          THEN error('duckdp: beta_min must be in (0, 1]')::DOUBLE[]
                                        ELSE list_transform(range(iterations::BIGINT), lambda j:
                                               CASE WHEN j = 0 THEN 1.0e0 ELSE 1 / beta_min::DOUBLE END) END);

-- The SIPS rounds (docs/specs/adaptive-sips.md, on DP-SIPS Alg. 3). Each pair carries its key's
-- state: status 'o' (in play), 'r' (released), 'd' (dropped), and level ∈ {β_min, 1}. Round j:
--   1. R_u = the user's pairs in play;  2. R̃_u = the min(|R_u|, Δ0) of smallest PRF value (fresh salt);
--   3. x_u = R̃_u's levels scaled to unit ℓ2 norm, capped at c_j/√d (d = |R̃_u|), the capped mass
--      re-spread over the lower level, a final clip (sql/adaptive_sips_vectors.sql): ‖x_u‖₂ ≤ 1;
--   4. w = Σ_u x_u; ŵ = w + N(0, σ_j²) on every key of ∪R_u (key id: its rank among them);
--   5. O_j = keys of ∪R̃_u with ŵ ≥ T_j;  6. z = ŵ/σ_j: dropped if z < a_drop, level 1 if z ≥ a_full,
--      else β_min. The result is ∪_j O_j; ŵ, levels and drops are never output.
-- With beta_min = 1 and a_drop = a_full = −∞ every level stays 1 and x_u = 1/√d: DP-SIPS (Alg. 3).
-- Privacy: each round is a Gaussian mechanism of ℓ2 sensitivity 1 given the public state, novel
-- keys bounded by T_j (spec privacy steps 1–3; DP-SIPS Thm 13, 14; Dong, Roth & Su 2022 Cor. 3.3).
CREATE OR REPLACE TEMP MACRO duckdp_sips(tbl, user_col, item_col, epsilon, rho, delta, max_contributions,
                                         iterations, ratio, a_drop, a_full, beta_min, truncation) AS TABLE
WITH RECURSIVE plan AS MATERIALIZED (   -- σ_j, T_j, c_j of every round and its salts (no data read)
  SELECT list(sigma ORDER BY round) AS _dp_sigma, list(threshold ORDER BY round) AS _dp_threshold,
         list(cap ORDER BY round) AS _dp_cap,
         list_transform(range(count(*)), lambda j: duckdp_salt(any_value(nonce), j, 't')) AS _dp_trunc_salt,
         list_transform(range(count(*)), lambda j: duckdp_salt(any_value(nonce), j, 'n')) AS _dp_noise_salt,
         duckdp_truncation(truncation) AS _dp_truncation
  FROM (SELECT duckdp_nonce() AS nonce),
       duckdp_sips_plan(epsilon := epsilon, rho := rho, delta := delta, max_contributions := max_contributions,
                        iterations := iterations, ratio := ratio, beta_min := beta_min)
), rounds AS (       -- round 0: every distinct pair in play at level 1; then one row per pair per round
  SELECT pairs.*, 0 AS _dp_round, 'o' AS _dp_status, 1.0e0 AS _dp_level
  FROM duckdp_pairs(tbl, user_col, item_col) AS pairs
  UNION ALL
  SELECT * FROM (
    WITH open AS (   -- step 1: R_u, the pairs still in play, with the round's parameters
      SELECT rounds.*, plan._dp_sigma[_dp_round + 1] AS _dp_s, plan._dp_threshold[_dp_round + 1] AS _dp_t,
             plan._dp_cap[_dp_round + 1] AS _dp_c, plan._dp_trunc_salt[_dp_round + 1] AS _dp_ts,
             plan._dp_noise_salt[_dp_round + 1] AS _dp_ns, plan._dp_truncation AS _dp_tr
      FROM rounds, plan WHERE _dp_status = 'o' AND _dp_round < len(plan._dp_sigma)
    ), kept AS (     -- step 2: R̃_u and d
      SELECT _dp_user, _dp_item, _dp_level, _dp_c, least(_dp_size, max_contributions) AS _dp_d
      FROM (SELECT *, count(*) OVER (PARTITION BY _dp_user) AS _dp_size FROM open)
      QUALIFY duckdp_trunc_rank(_dp_user, _dp_item, _dp_ts, _dp_size, max_contributions,
                                truncation := _dp_tr) <= max_contributions
    ), counted AS (  -- step 3: Σl² = n_hi + n_lo·β² from counts (β the lower level), never a float sum
      SELECT *, count(*) FILTER (WHERE _dp_level >= 1) OVER (PARTITION BY _dp_user) AS _dp_nhi,
             count(*) FILTER (WHERE _dp_level < 1) OVER (PARTITION BY _dp_user)
               * pow(coalesce(max(_dp_level) FILTER (WHERE _dp_level < 1) OVER (PARTITION BY _dp_user), 0), 2) AS _dp_sslo
      FROM kept
    ), scaled AS (   -- the unit scale 1/√Σl² and the cap c/√d (adaptive_sips_vectors.sql)
      SELECT *, 1 / sqrt(_dp_nhi + _dp_sslo) AS _dp_unit, _dp_c / sqrt(_dp_d) AS _dp_cv FROM counted
    ), weights AS (  -- step 4: w_i = Σ_u x_ui over R̃ (keys of ∪R_u that nobody kept get no row)
      SELECT _dp_item, sum(CASE WHEN _dp_unit <= _dp_cv THEN _dp_level * _dp_unit
                                WHEN _dp_level >= 1 THEN _dp_cv
                                ELSE least(_dp_level * sqrt(greatest(1 - _dp_nhi * _dp_cv * _dp_cv, 0) / _dp_sslo),
                                           _dp_cv) END) AS _dp_w
      FROM scaled GROUP BY _dp_item
    ), decided AS (  -- steps 4–6 per key of ∪R_u: noise (only where the result is used), release, state
      SELECT _dp_item, _dp_w IS NOT NULL AND _dp_noisy >= _dp_t AS _dp_released, _dp_noisy / _dp_s AS _dp_z
      FROM (SELECT *, CASE WHEN _dp_w IS NOT NULL OR a_drop::DOUBLE > '-infinity'::DOUBLE OR beta_min::DOUBLE < 1
                           THEN duckdp_gaussian_noise(coalesce(_dp_w, 0), _dp_s, _dp_ns, _dp_key_id::UBIGINT) END AS _dp_noisy
            FROM (SELECT keys.*, weights._dp_w, row_number() OVER (ORDER BY keys._dp_item) AS _dp_key_id
                  FROM (SELECT DISTINCT _dp_item, _dp_s, _dp_t, _dp_ns FROM open) AS keys
                  LEFT JOIN weights USING (_dp_item)))
    )
    SELECT open.* EXCLUDE (_dp_round, _dp_status, _dp_level, _dp_s, _dp_t, _dp_c, _dp_ts, _dp_ns, _dp_tr),
           open._dp_round + 1,
           CASE WHEN _dp_released THEN 'r' WHEN _dp_z < a_drop::DOUBLE THEN 'd' ELSE 'o' END,
           CASE WHEN _dp_z >= a_full::DOUBLE THEN 1.0e0 ELSE beta_min::DOUBLE END
    FROM open JOIN decided USING (_dp_item))
)
SELECT * EXCLUDE (_dp_item) __DUCKDP_SEEDED_COLUMN__
FROM (SELECT DISTINCT * EXCLUDE (_dp_user, _dp_round, _dp_status, _dp_level) FROM rounds WHERE _dp_status = 'r')
ORDER BY _dp_item;

-- DP-SIPS (Swanberg, Desfontaines, Haney 2023, Alg. 3, Thm 14): round i runs Weighted Gaussian with
-- its share of ε or ρ and of δ on every user's set minus the keys released so far, re-truncated
-- to Δ0; the output is the union. zCDP composes additively (Thm 14); (ε, δ) exactly as Gaussians.
CREATE OR REPLACE TEMP MACRO duckdp_dpsips(tbl, user_col, item_col, epsilon := NULL, rho := NULL, delta := NULL,
                                           max_contributions := 100, iterations := 3, ratio := 1 / 3,
                                           truncation := 'per_user') AS TABLE
SELECT * FROM duckdp_sips(tbl, user_col, item_col, epsilon, rho, delta, max_contributions, iterations, ratio,
                          '-infinity'::DOUBLE, '-infinity'::DOUBLE, 1, truncation);

-- Adaptive SIPS (docs/specs/adaptive-sips.md): DP-SIPS rounds in which keys whose noisy weight fell
-- below a_drop·σ are dropped and keys below a_full·σ get level β_min; defaults as in Python.
CREATE OR REPLACE TEMP MACRO duckdp_adaptive_sips(tbl, user_col, item_col, epsilon := NULL, rho := NULL,
                                                  delta := NULL, max_contributions := 100, iterations := 3,
                                                  ratio := 1 / 3, a_drop := -0.5, a_full := 0.5, beta_min := 0.5,
                                                  truncation := 'per_user') AS TABLE
SELECT * FROM duckdp_sips(tbl, user_col, item_col, epsilon, rho, delta, max_contributions, iterations, ratio,
  CASE WHEN NOT (a_drop::DOUBLE > '-infinity'::DOUBLE AND a_drop::DOUBLE < 'infinity'::DOUBLE
                 AND a_full::DOUBLE > '-infinity'::DOUBLE AND a_full::DOUBLE < 'infinity'::DOUBLE)
         THEN error('duckdp: a_drop and a_full must be finite numbers (in units of the round''s σ)')::DOUBLE
       WHEN a_drop::DOUBLE > a_full::DOUBLE THEN error('duckdp: a_drop must not exceed a_full')::DOUBLE
       ELSE a_drop::DOUBLE END, a_full, beta_min, truncation);

-- MAD, unbiased (Chen et al. ICML 2025, Alg. 3, as reconstructed in docs/specs/mad-mad2r.md §5): capped
-- sets S̃_u with d_u = |S̃_u| and w^u_i = 1/√d_u; adaptive users A have Δ_min ≤ d_u ≤ Δ_max.
-- Stage 1 ŵ_i = Σ_{u∈A} 1/d_u; stage 2 t_i = min(ŵ_i, τ) with τ = T + bσ, ρ_i = (ŵ_i − t_i)/ŵ_i;
-- stage 3 e_u = Σ_i ρ_i/d_u; stage 4 w_i = t_i + Σ_{u∈A} (f·e_u + 1 − 1/√d_u)/√d_u + Σ_{u∉A} 1/√d_u
-- with f = 1/√Δ_max − 1/(2Δ_max). ℓ2 sensitivity 1 and ρ(k) = 1/√k (spec Lemmas 5.8, 5.4), so
-- Basic's σ and T apply (Corollary 5.2); τ ≥ 1 is required (Lemma 5.4).
CREATE OR REPLACE TEMP MACRO duckdp_mad(tbl, user_col, item_col, epsilon := NULL, rho := NULL, delta := NULL,
                                        max_contributions := 100, adaptive_excess := 3,
                                        adaptive_min_degree := 2, max_adaptive_degree := NULL,
                                        truncation := 'per_user') AS TABLE
WITH plan AS MATERIALIZED (      -- σ, T, τ, f, Δ_max (no data read) and the salts
  SELECT sigma, threshold,
         CASE WHEN NOT adaptive_excess::DOUBLE >= 0 THEN error('duckdp: adaptive_excess must be >= 0')::DOUBLE
              WHEN threshold + adaptive_excess::DOUBLE * sigma < 1
                THEN error('duckdp: adaptive threshold T + b·σ < 1 could truncate novel items (spec Lemma 5.4)')::DOUBLE
              ELSE threshold + adaptive_excess::DOUBLE * sigma END AS _dp_tau,
         coalesce(max_adaptive_degree, max_contributions)::BIGINT AS _dp_max_degree,
         CASE WHEN NOT (adaptive_min_degree::BIGINT >= 1
                        AND adaptive_min_degree::BIGINT <= coalesce(max_adaptive_degree, max_contributions)::BIGINT)
                THEN error('duckdp: need 1 <= adaptive_min_degree <= max_adaptive_degree')::BIGINT
              ELSE adaptive_min_degree::BIGINT END AS _dp_min_degree,
         1 / sqrt(coalesce(max_adaptive_degree, max_contributions)::DOUBLE)
           - 1 / (2 * coalesce(max_adaptive_degree, max_contributions)::DOUBLE) AS _dp_reroute,
         duckdp_salt(nonce, 0, 't') AS _dp_trunc_salt, duckdp_salt(nonce, 0, 'n') AS _dp_noise_salt,
         duckdp_truncation(truncation) AS _dp_truncation
  FROM (SELECT duckdp_nonce() AS nonce), duckdp_plan(epsilon := epsilon, rho := rho, delta := delta, max_contributions := max_contributions)
), bounded AS MATERIALIZED (     -- kept pairs with d_u and whether the user is adaptive
  SELECT r.* EXCLUDE (_dp_rank, _dp_size), least(_dp_size, max_contributions)::DOUBLE AS _dp_d,
         least(_dp_size, max_contributions) BETWEEN plan._dp_min_degree AND plan._dp_max_degree AS _dp_adaptive
  FROM (SELECT p.*, duckdp_trunc_rank(_dp_user, _dp_item, plan._dp_trunc_salt, _dp_size, max_contributions,
                                      truncation := plan._dp_truncation) AS _dp_rank
        FROM (SELECT pairs.*, count(*) OVER (PARTITION BY _dp_user) AS _dp_size
              FROM duckdp_pairs(tbl, user_col, item_col) AS pairs) AS p, plan) AS r, plan
  WHERE _dp_rank <= max_contributions
), truncated AS (    -- stages 1–2: ρ_i = (ŵ_i − τ)/ŵ_i for keys whose initial weight exceeds τ
  SELECT _dp_item, (sum(1 / _dp_d) - any_value(plan._dp_tau)) / sum(1 / _dp_d) AS _dp_ratio
  FROM bounded, plan WHERE _dp_adaptive GROUP BY _dp_item HAVING sum(1 / _dp_d) > any_value(plan._dp_tau)
), excess AS (       -- stage 3: e_u = Σ_i ρ_i/d_u, each adaptive user's share of the excess
  SELECT _dp_user, sum(_dp_ratio / _dp_d) AS _dp_e FROM bounded JOIN truncated USING (_dp_item)
  WHERE _dp_adaptive GROUP BY _dp_user
), weighted AS (     -- stage 4: truncated initial weight + rerouted excess + top-up (+ non-adaptive users)
  SELECT * EXCLUDE (_dp_user, _dp_d, _dp_adaptive, _dp_e, _dp_tau, _dp_reroute),
         least(coalesce(sum(1 / _dp_d) FILTER (WHERE _dp_adaptive), 0), any_value(_dp_tau))
         + sum(CASE WHEN _dp_adaptive
                    THEN (_dp_reroute * coalesce(_dp_e, 0) + 1 - 1 / sqrt(_dp_d)) / sqrt(_dp_d)
                    ELSE 1 / sqrt(_dp_d) END) AS _dp_w
  FROM (SELECT b.*, excess._dp_e, plan._dp_tau, plan._dp_reroute
        FROM bounded AS b LEFT JOIN excess USING (_dp_user), plan)
  GROUP BY ALL
), released AS (     -- keys whose MAD weight plus fresh noise clears T (spec §2 step 5)
  SELECT weighted.* FROM (SELECT *, row_number() OVER (ORDER BY _dp_item) AS _dp_key_id FROM weighted) AS weighted, plan
  WHERE duckdp_gaussian_noise(_dp_w, plan.sigma, plan._dp_noise_salt, _dp_key_id::UBIGINT) >= plan.threshold
)
SELECT * EXCLUDE (_dp_item, _dp_w, _dp_key_id) __DUCKDP_SEEDED_COLUMN__ FROM released ORDER BY _dp_item;

-- ---------------------------------------------------------------------------------------------
-- max_contributions 'auto' for the shell (duckdp/privacy/auto_contributions.py; issue 21). Two calls:
--   SELECT * FROM duckdp_auto_contributions('reviews', 'user_id', 'item', rho := 0.1, delta := 1e-5);
--   -- → max_contributions, and the epsilon/rho/delta left for the mechanism; then, with those values:
--   SELECT * FROM duckdp_dpsips('reviews', 'user_id', 'item', rho := <rho>, delta := <delta>,
--                               max_contributions := <max_contributions>);
-- The first spends `share` of the budget (default 0.005) on a private Δ0, the second the rest: the two
-- together stay within the request only if the second gets no more than the first's output (the
-- shell cannot check this; duckdp.select does both in one call and charges them together). The result
-- names its `composition`: 'zcdp', 'gdp' (exact Gaussian-DP split) or 'basic'.
-- ---------------------------------------------------------------------------------------------

-- Δ0 from the 7 bucket counts, σ_a and 7 standard normal draws: auto_contributions.choose. Each noisy
-- count is soft-thresholded, max(noisy − σ_a, 0) (SHRINK = 1, auto_contributions.denoise); Δ0 is the p90
-- of those, geometric inside its bucket [4^b, 4^(b+1)), ceil'ed and clamped to [1, 4096] (the open
-- bucket [4096, ∞) gives 4096); 100 if every soft-thresholded count is 0.
CREATE OR REPLACE TEMP MACRO duckdp_auto_choose(counts, sigma, z) AS
  list_transform([list_transform(range(7), lambda b: counts[b + 1]::DOUBLE + sigma::DOUBLE * z[b + 1]::DOUBLE)],
    lambda noisy:
      list_transform([list_transform(range(7), lambda b: greatest(noisy[b + 1] - sigma::DOUBLE, 0.0e0))], lambda kept:
        list_transform([[list_sum(kept), 0.9e0 * list_sum(kept)]], lambda tt:
          list_transform([list_transform(range(7), lambda j: list_sum(list_slice(kept, 1, j + 1)))], lambda cum:
            list_transform([least(coalesce(list_filter(range(7), lambda j: cum[j + 1] >= tt[2])[1], 6), 6)], lambda k:
              CASE WHEN NOT tt[1] > 0 THEN 100
                   WHEN k >= 6 THEN 4096
                   ELSE least(greatest(ceil(pow(4.0e0, k)
                          * pow(4.0e0, least(greatest((tt[2] - (cum[k + 1] - kept[k + 1])) / kept[k + 1], 0.0e0), 1.0e0))
                        ), 1), 4096)::BIGINT END
            )[1])[1])[1])[1])[1];

-- The ε at which μ-GDP spends δ: the smallest ε with δ_μ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) ≤ δ
-- (Dong, Roth & Su 2022, Cor. 2.13; δ_μ is the analytic Gaussian δ at σ = 1/μ), by 64 bisection steps
-- on [0, 1024]; the upper end (which satisfies it) is returned.
CREATE OR REPLACE TEMP MACRO duckdp_gdp_epsilon(mu, delta) AS
  list_reduce(list_transform(range(64), lambda i: [0.0e0, 0.0e0]),
    lambda br, step: CASE WHEN duckdp_analytic_gaussian_delta(1 / mu::DOUBLE, (br[1] + br[2]) / 2) > delta::DOUBLE
                          THEN [(br[1] + br[2]) / 2, br[2]] ELSE [br[1], (br[1] + br[2]) / 2] END,
    [0.0e0, 1024.0e0])[2];

-- The (ε, δ) split of duckdp.select (auto_contributions._split_gdp), exact for the shell's mechanisms,
-- all Gaussian with joint σ at (ε, δ/2) and novel keys on δ/2: δ_m = (1 − share)·δ; μ = 1/σ(ε, δ − δ_m/2);
-- ε_m = the ε at which √(1 − share)·μ-GDP spends δ_m/2; μ_m = 1/σ(ε_m, δ_m/2), the mechanism's μ at
-- (ε_m, δ_m); σ_a = 1/√(μ² − μ_m²) (+1e-9 relative). GDP composes exactly (Dong et al. Cor. 3.3): the
-- curve at ε is ≤ δ − δ_m/2, and with the novel keys' δ_m/2 the whole is (ε, δ)-DP. NULL where it does
-- not apply (ε_m outside [ε/2, ε)): the caller then uses basic composition.
CREATE OR REPLACE TEMP MACRO duckdp_auto_gdp_split(epsilon, delta, share) AS
  list_transform([delta::DOUBLE - delta::DOUBLE * share::DOUBLE], lambda delta_m:
    list_transform([1 / duckdp_analytic_gaussian_sigma(epsilon, delta::DOUBLE - delta_m / 2)], lambda mu:
      list_transform([duckdp_gdp_epsilon(mu * sqrt(1 - share::DOUBLE), delta_m / 2)], lambda eps_m:
        CASE WHEN eps_m >= epsilon::DOUBLE / 2 AND eps_m < epsilon::DOUBLE THEN
          list_transform([1 / duckdp_analytic_gaussian_sigma(eps_m, delta_m / 2)], lambda mu_m:
            CASE WHEN mu_m < mu THEN {'epsilon': eps_m, 'delta': delta_m,
                                      'sigma': duckdp_round_up(1 / sqrt(mu * mu - mu_m * mu_m)) * (1 + 1e-9)} END)[1]
        END)[1])[1])[1];

-- Users per bucket of their distinct-key count [1, 4), [4, 16), …, [1024, 4096), [4096, ∞): each user in
-- exactly one bucket (ℓ2 sensitivity 1), + N(0, σ_a²) from the keyed PRF under this call's own salt
-- (purpose 'a'). zCDP: σ_a = 1/√(2·share·ρ) (Bun & Steinke 2016 Prop. 1.6), the mechanism gets the rest
-- (additive, Lemma 2.3). (ε, δ): duckdp_auto_gdp_split, else basic composition (Dwork & Roth 2014 Thm
-- 3.16): the analytic Gaussian σ at (share·ε, share·δ) (Balle & Wang 2018 Thm 8), the mechanism the rest.
-- The noisy counts stay inside; only Δ0 and the budgets are returned. Under zCDP and basic composition
-- the mechanism's budget is (1 − 1e-12)·(the rest), so the parts never sum above the request by a rounding.
CREATE OR REPLACE TEMP MACRO duckdp_auto_contributions(tbl, user_col, item_col, epsilon := NULL, rho := NULL,
                                                       delta := NULL, share := 0.005) AS TABLE
WITH checked AS MATERIALIZED (   -- budget checks (duckdp_plan's), the (ε, δ) split and the salt (no data read)
  SELECT CASE WHEN NOT (share::DOUBLE > 0 AND share::DOUBLE <= 0.25)
                THEN error('duckdp: share must be a number in (0, 0.25]')::DOUBLE ELSE share::DOUBLE END AS _dp_share,
         CASE WHEN epsilon IS NOT NULL THEN duckdp_auto_gdp_split(epsilon, delta, share) END AS _dp_gdp,
         duckdp_salt(nonce, 0, 'a') AS _dp_salt
  FROM (SELECT duckdp_nonce() AS nonce), (SELECT * FROM duckdp_plan(epsilon := epsilon, rho := rho, delta := delta)
                                          LIMIT 1)
), plan AS (         -- σ_a, the estimate's cost and the mechanism's budget
  SELECT CASE WHEN rho IS NOT NULL THEN duckdp_zcdp_sigma(rho::DOUBLE * _dp_share)
              WHEN _dp_gdp IS NOT NULL THEN _dp_gdp.sigma
              ELSE duckdp_analytic_gaussian_sigma(epsilon::DOUBLE * _dp_share, delta::DOUBLE * _dp_share) END AS _dp_sigma,
         CASE WHEN rho IS NOT NULL THEN 'zcdp' WHEN _dp_gdp IS NOT NULL THEN 'gdp' ELSE 'basic' END AS _dp_composition,
         CASE WHEN _dp_gdp IS NOT NULL THEN _dp_gdp.epsilon
              ELSE (epsilon::DOUBLE - epsilon::DOUBLE * _dp_share) * (1 - 1e-12) END AS _dp_eps_m,
         (rho::DOUBLE - rho::DOUBLE * _dp_share) * (1 - 1e-12) AS _dp_rho_m,
         CASE WHEN _dp_gdp IS NOT NULL THEN _dp_gdp.delta
              ELSE (delta::DOUBLE - delta::DOUBLE * _dp_share) * (1 - 1e-12) END AS _dp_delta_m,
         _dp_salt
  FROM checked
), sizes AS (        -- each user's distinct-key count |W_u| and its bucket
  SELECT len(list_filter([1, 4, 16, 64, 256, 1024, 4096], lambda e: e <= count(*))) - 1 AS _dp_bucket
  FROM duckdp_pairs(tbl, user_col, item_col) GROUP BY _dp_user
), counts AS (
  SELECT list_transform(range(7), lambda b: coalesce(list_filter(hist, lambda h: h[1] = b)[1][2], 0)) AS _dp_counts
  FROM (SELECT list([_dp_bucket, n]) AS hist FROM (SELECT _dp_bucket, count(*) AS n FROM sizes GROUP BY _dp_bucket))
)
SELECT duckdp_auto_choose(_dp_counts, _dp_sigma,
                          list_transform(range(7), lambda b: duckdp_gaussian_noise(0, 1, _dp_salt, b::UBIGINT)))
         AS max_contributions,
       _dp_eps_m AS epsilon, _dp_rho_m AS rho, _dp_delta_m AS delta,
       epsilon::DOUBLE - _dp_eps_m AS cost_epsilon, rho::DOUBLE - _dp_rho_m AS cost_rho,
       delta::DOUBLE - _dp_delta_m AS cost_delta, _dp_sigma AS sigma, _dp_composition AS composition
       __DUCKDP_SEEDED_COLUMN__
FROM counts, plan;
