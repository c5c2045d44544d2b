"""Numpy reference of the private GROUP BY bounding stages (docs/specs/private-group-by.md §2, stages
1–5): restrict to the released keys, keep ≤ Δ0 keys per user and ≤ m rows per (user, key) by keyed
hash orders, clip and discretise, per-key integer measures. Engines' stages are to match it; the
`clip`, `cap_rows` and `cap_keys` switches exist only to prove the sensitivity audit's power."""
from __future__ import annotations

import hashlib

import numpy as np


def _order(salt: bytes, *parts) -> bytes:
    """A keyed hash of one user's own data: any such fixed function is an allowed truncation order."""
    return hashlib.blake2b(repr(parts).encode(), key=salt, digest_size=16).digest()


def bounded_measures(plan, users, keys, values, released, salt: bytes = b"reference", *,
                     clip: bool = True, cap_rows: bool = True, cap_keys: bool = True) -> dict:
    """{(metric, part): int array over `released` (sorted)} of the true integers the noise is added to."""
    released = sorted(set(released))
    index = {k: i for i, k in enumerate(released)}
    rows: dict = {}                                             # user → key → [(order, value)]
    for j, (u, k, v) in enumerate(zip(users, keys, values, strict=True)):
        if k in index:                                          # stage 1: restrict to K
            rows.setdefault(u, {}).setdefault(k, []).append((_order(salt, u, k, v, j), v))
    kept = []
    for u, by_key in rows.items():
        ks = sorted(by_key, key=lambda k, u=u: _order(salt, u, k))
        for k in ks[:plan.max_contributions] if cap_keys else ks:           # stage 2: ≤ Δ0 keys
            rs = sorted(by_key[k], key=lambda r: r[0])
            for _, v in rs[:plan.max_rows_per_key] if cap_rows else rs:     # stage 3: ≤ m rows
                kept.append((u, index[k], v))
    out = {}
    for mt in plan.metrics:
        for ms in (m for m in plan.measures if m.metric == mt.name):
            acc = np.zeros(len(released), dtype=object)
            if ms.part == "users":
                for _, i in {(u, i) for u, i, _ in kept}:          # distinct (user, key) pairs
                    acc[i] += 1
            elif ms.part == "count":
                for _, i, _ in kept:
                    acc[i] += 1
            else:                                               # stage 4: clip, round to the grid, centre
                for _, i, v in kept:
                    x = min(max(v, mt.lower), mt.upper) if clip else v
                    acc[i] += round(x / ms.step) - ms.offset
            out[(mt.name, ms.part)] = acc
    return out
