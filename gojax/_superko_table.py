"""The superko history: earlier positions' 64-bit keys in a sorted table.

A state keeps the keys of the positions its game has been through (``[H, 2]``
uint32, two 32-bit lanes, sorted by lane 0, unused slots last) so that testing
all ``P`` candidate moves costs ``P`` lookups instead of ``P * H`` comparisons.
Fixed shapes, no loops: a key is inserted with one shifted copy, and a lookup is a
two-level search (``contains``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

UNUSED_KEY = np.uint32(0xFFFFFFFF)  # fills unused slots; sorts last


def insert_sorted(keys: jax.Array, count: jax.Array, key: jax.Array):
    """Insert ``key`` ([2]) into ``keys`` ([H, 2], sorted by lane 0); O(H) and branch-free."""
    if keys.shape[0] == 0:
        return keys, count
    at = jnp.sum(keys[:, 0] < key[0])  # unused slots hold the largest value and stay last
    index = jnp.arange(keys.shape[0])[:, None]
    shifted = jnp.concatenate([keys[:1], keys[:-1]])
    keys = jnp.where(index < at, keys, jnp.where(index == at, key[None], shifted))
    return keys, count + 1


def contains(keys: jax.Array, count: jax.Array, queries: jax.Array) -> jax.Array:
    """``[Q, 2]`` queries → ``[Q]`` bool: whether each key is among the first ``count``.

    A two-level search on lane 0 without loops or dependent gathers (at batch
    size one XLA's per-iteration overhead dominates a loop, and a binary
    search's chain of single-element gathers is slow on CPU): the sorted
    table is cut into buckets of ``F`` keys; one vectorised comparison with
    the buckets' first keys finds, for each query, the bucket that holds its
    lower bound, and that bucket plus the next bucket's first two slots are
    compared on both lanes. So a query is found when at most two stored keys
    share its lane-0 value (three earlier positions sharing those 32 bits of
    hash is a 1e-11-per-game event, far below any other source of error).
    """
    h = keys.shape[0]
    if h == 0:
        return jnp.zeros(queries.shape[0], bool)
    # About sqrt(H) keys a bucket, but 8 for short tables: a 9x9 game's 163 keys took
    # 10-15% less time with 8 than with 16 (B=256), while 13x13 and 19x19 are slower at 8.
    width = 8 if h < 256 else max(8, 1 << round(math.log2(math.sqrt(h))))
    buckets = -(-h // width)
    pad = (buckets + 1) * width - h  # whole buckets, plus an empty one after the last
    padded = jnp.concatenate([keys, jnp.full((pad, 2), UNUSED_KEY, jnp.uint32)])
    blocks = padded.reshape(buckets + 1, width, 2)
    # The bucket holding the lower bound: the last one whose first key is below the query.
    below = jnp.sum(blocks[None, :-1, 0, 0] < queries[:, None, 0], axis=1, dtype=jnp.int32)
    bucket = jnp.maximum(below - 1, 0)  # [Q]
    # Whole-bucket gathers (one slice per query), then both lanes compared.
    index = bucket[:, None] * width + jnp.arange(width)[None, :]  # [Q, width]
    hit = jnp.any(jnp.all(blocks[bucket] == queries[:, None, :], axis=-1) & (index < count), 1)
    after = (bucket + 1) * width
    for offset in (0, 1):  # a run of equal lane-0 values may continue into the next bucket
        slot = blocks[bucket + 1, offset]
        hit = hit | (jnp.all(slot == queries, axis=-1) & (after + offset < count))
    return hit
