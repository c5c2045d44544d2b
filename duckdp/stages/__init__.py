"""The stage library: mechanisms are compositions of stages; each engine implements every stage once.

Model: PipelineDP's `pipeline_backend.py` (one `PipelineBackend` interface, Local/Beam/Spark
implementations under one algorithm layer). duckdp's stages are coarser than PipelineDP's
map/group-by primitives — one stage is one step of partition selection — so each engine can run a
stage its own best way (DuckDB: checked SQL templates with bound parameters and quoted identifiers;
Spark: DataFrame API, or the same template through `spark.sql` where its SQL is also Spark SQL).
A mechanism's `run(stages, plan, params)` calls only the methods below and its own stages, and never
learns which engine runs it; `plan()` is data-free and engine-neutral.

ENGINE INTERFACE (`duckdp.stages.base.Engine`: what every engine implements; it names no mechanism)
----------------------------------------------------------------------------------
Frames are the engine's opaque handles (DuckDB: `Query`, lazily composed SQL + bound values; Spark:
a DataFrame). Column contract, identical on every engine:
  pairs   : `_dp_user`, `_dp_k0 … _dp_k{n−1}` (the key columns under internal names), distinct per
            (user, key), possibly with carried columns (e.g. MAD2R's `_dp_b`)
  sized   : pairs + `_dp_size` BIGINT = |W_u|, the user's number of pairs
  kept    : the carried pair columns + `_dp_d` DOUBLE = min(|W_u|, Δ0), the user's kept size
  weights : keys + `_dp_w` DOUBLE, one row per key
  keys    : key columns only (released or removed keys)

Generic stages (every mechanism composes these; signatures in `duckdp/stages/base.py`):
  pairs()                      distinct (user, key) pairs of the input (NULLs were refused earlier)
  sized(pairs)                 attach |W_u|
  truncate(sized, Δ0, salt=None)  each user keeps min(|W_u|, Δ0) keys: the Δ0 of smallest keyed hash
                               of (user, key) under a FRESH salt (drawn per call, or by the caller from
                               the run's randomness and handed in: a round whose other stages must order
                               pairs as its truncation will; a uniform subset, fixed given the salt)
                               — or, with the run's truncation="global", of the key alone (one secret
                               order of the keys for every user); users within Δ0 keep all. Engines
                               may run it in user-hash partitions to bound memory (their count may
                               follow the data); the kept set must not depend on that, nor on the
                               order rows arrive in (ties of the hash go by the key).
  contribution_histogram(pairs, edges)  exact users per bucket edges[b] ≤ |W_u| < edges[b+1] (the last
                               open-ended), as (bucket, users) rows: the input of the private Δ0
                               choice (duckdp/privacy/auto_contributions.py), which noises it
  weights(kept, e)             Σ over kept users of _dp_d^(−e) per key (e = ½, 1 or 0: Gopi et al.
                               ICML 2020 §1.1)
  release(weights, plan)       noise + threshold: keys with `_dp_w` + plan.scale·noise ≥ plan.threshold,
                               noise from the run's keyed AES PRF on each key's injective counter
                               (duckdp/prf.py, duckdp/counters.py; DuckDB: duckdp/noise_stage.py;
                               output: keys). Noise depends on (PRF key, round, counter, collision
                               rank) only, so every engine draws the same noise for the same seed.
  remove(pairs, keys)          pairs whose key is not in `keys` (anti-join; DP-SIPS Alg. 3 line 9)
  store(frame, name)           materialise (DuckDB: TEMP table; Spark: persist, memory and disk); drop(frame)
  empty_keys(like)             an empty stored key frame; append(stored, keys) → (stored ∪ keys, added)
  union(a, b)                  two key frames concatenated
  output(keys)                 the engine's result table (Arrow) under the input's key names, sorted
                               by the key columns so its order is a function of the released set
                               alone; called once on all released keys; num_rows(table) on it

  decide(weights, plan, rule, added, round_tag=None)  the general noise step: noise on EVERY row of
                               `weights` as in release (under a fresh round tag, or one the caller drew
                               to draw more of the same round's noise later: MAD2R's lazy round 1),
                               then the mechanism's numpy `rule(weights, noisy) -> (mask, {column:
                               values})` picks the rows and adds columns (`added`: name → type).
                               The rule is passed in, so no engine imports a mechanism (MAD2R's screen,
                               adaptive SIPS's next state).

Mechanism-owned stages: a family's own stages (MAD's weighting, MAD2R's water-filling, adaptive SIPS's
capped vectors and state, the policies' data preparation, truncated geometric's keep draw, count
release's top counts) live in its folder, duckdp/mechanisms/<family>/, once per engine it declares
(`Mechanism.engines`): `duckdb.py` (with the templates in `sql/` there) and `spark.py`, functions
taking the engine as first argument, reached through `Mechanism.own_stages(engine)`. `select` refuses
an engine a mechanism does not declare before any budget is charged.

Runs open through the engine registry, `duckdp.engines.engine_for(con).open_run` (DuckDB:
duckdp/lifecycle.py, Spark: duckdp/spark/lifecycle.py: resolve input → charge → NULL check → close);
the entry points (`select`, `count_release`, `evaluate`) never branch on the engine.

Salts are drawn from the run's `Randomness` in call order, so a seeded run is reproducible on one
engine; cross-engine agreement is required for weights (no truncation active), σ and T, not for
which keys truncation keeps.
"""
from __future__ import annotations

from typing import NamedTuple


class Query(NamedTuple):
    """DuckDB's frame: SQL text (identifiers already quoted) and the values it binds."""

    sql: str
    params: dict


__all__ = ["Query"]
