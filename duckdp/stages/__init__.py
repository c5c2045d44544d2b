"""The stage library: mechanisms are compositions of stages; each engine implements every stage once.

Model: PipelineDP's `pipeline_backend.py` (one `PipelineBackend` interface, Local/Beam/Spark
implementations under one algorithm layer). duckdp's stages are coarser than PipelineDP's
map/group-by primitives — one stage is one step of partition selection — so each engine can run a
stage its own best way (DuckDB: checked SQL templates with bound parameters and quoted identifiers;
Spark: DataFrame API). A mechanism's `run(stages, plan, params)` calls only the methods below and
never learns which engine runs it; `plan()` is data-free and engine-neutral.

ENGINE INTERFACE (what an engine implements; the Spark engine follows this contract)
----------------------------------------------------------------------------------
Frames are the engine's opaque handles (DuckDB: `Query`, lazily composed SQL + bound values; Spark:
a DataFrame). Column contract, identical on every engine:
  pairs   : `_dp_user`, `_dp_k0 … _dp_k{n−1}` (the key columns under internal names), distinct per
            (user, key), possibly with carried columns (e.g. MAD2R's `_dp_b`)
  sized   : pairs + `_dp_size` BIGINT = |W_u|, the user's number of pairs
  kept    : the carried pair columns + `_dp_d` DOUBLE = min(|W_u|, Δ0), the user's kept size
  weights : keys + `_dp_w` DOUBLE, one row per key
  keys    : key columns only (released or removed keys)

Shared stages (every mechanism composes these; signatures in `duckdp/stages/base.py`):
  pairs()                      distinct (user, key) pairs of the input (NULLs were refused earlier)
  sized(pairs)                 attach |W_u|
  truncate(sized, Δ0)          each user keeps min(|W_u|, Δ0) keys: the Δ0 of smallest keyed hash of
                               (user, key) under a FRESH per-call salt (a uniform subset, fixed given
                               the salt); users within Δ0 keep all. Engines may run it in user-hash
                               partitions to bound memory; the kept set must not depend on that.
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
  store(frame, name)           materialise (DuckDB: TEMP table; Spark: cache/checkpoint); drop(frame)
  empty_keys(like)             an empty stored key frame; append(stored, keys) → (stored ∪ keys, added)
  union(a, b)                  two key frames concatenated
  output(keys)                 the engine's result table (Arrow) under the input's key names, sorted
                               by the key columns so its order is a function of the released set
                               alone; called once on all released keys; num_rows(table) on it

Mechanism-specific stages (`<algo>_<stage>`; same contract on every engine):
  mad_vectors(kept)                      stored (_dp_user, keys, _dp_d, _dp_uw = 1/√d) (spec §2, §4)
  mad_weights(vectors, plan)             MAD stages 1–4 → weights (spec §5)
  mad2r_screen(pairs, vectors, plan1, plan2, Δ0)  stored exceptions (keys, _dp_released, _dp_round2,
                                         _dp_beta): round-1 noise on the whole universe, decisions by
                                         mechanisms.mad.screen_round1; `pairs` is the stored `sized` frame
  mad2r_vectors(pairs, status, Δ0, β_min, β_max)  stored round-2 vectors (spec §6, §4)
  mad2r_released(status)                 keys of O1
  adaptive_sips_remaining(pairs, state|None)  R_u with `_dp_level` (state None: round 1, level 1)
  adaptive_sips_vectors(kept, cap)       (_dp_user, keys, _dp_x): capped unit-norm vectors over R̃_u
  adaptive_sips_weights(vectors)         weights Σ_u x_ui over ∪R̃_u
  adaptive_sips_state(remaining, vectors, state, plan, params, j) → (stored state, released count):
                               noise on EVERY key of ∪R_u, decisions by mechanisms.adaptive_sips.next_state;
                               state = (keys, _dp_level, _dp_round), keys in play and keys released
  adaptive_sips_released(state)          keys the state records as released
  policy_pairs(counted, Δ0) → (pairs, items, n_items): truncated pairs with `_dp_n` (or GW's row
                               counts, untruncated) and dense `_dp_item` ids 0..n−1;
  count_users(pairs); policy_lists(pairs, items, batch_users) → iterator of Arrow batches, one list
                               column of item ids per user in keyed-random user order (has .close());
  policy_release(weights ndarray by item id, items, plan) → keys (noise + threshold over supp H)
  geometric_release(weights, keep_prob)  truncated geometric keep decision → keys
  top_counts(k)                          count release: the k largest distinct-user counts (keys,
                                         `_dp_count`) as an Arrow table, ties in keyed-hash order

Runs open through `duckdp.lifecycle.open_run` (connect check → run id → resolve input → charge →
NULL check → close); an engine provides the equivalent for its session type.

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
