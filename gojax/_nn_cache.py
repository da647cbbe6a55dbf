"""A network cache for :func:`gojax.search.search` (AlphaGo's NN cache, KataGo's
``nnCacheSizePowerOfTwo``): evaluations kept by position, so that a search that meets a
position already evaluated -- re-analysing it, stepping back through a game, a second
query on the same moves -- takes the stored result instead of running the network.

The cache is an array table that a search takes and gives back
(``search(..., cache=)`` -> ``SearchOutput.cache``): it lives in the jitted program with
the tree, on the device, with no host round trip per evaluation, and the caller keeps it
between searches. ``2 ** size_log2`` slots in sets of two: a position goes to the set
its key's low bits name, and a new one replaces the set's least recently used entry
(a table of that bounded size, least-recently-used within each set; a global order
would cost a search per step for little).

The key is a 64-bit hash of *everything the evaluator is given*: every array of the
``GoState`` (stones, player to move, ko, the recent moves and the superko history, komi,
whether the game is over, ...) and its static part (board size, rules), so that two
positions share a key only when the evaluator sees the same input (the chance that two
different inputs collide is about ``2 ** -64`` per pair). A table serves one evaluator
(one network, one symmetry setting): the caller keeps one per evaluator.

With a deterministic evaluator (a fixed symmetry or ``"average"``) a cached search is
the uncached one exactly. With ``symmetry="random"`` a cached position keeps the
symmetry it was first evaluated under, as in KataGo (its cache key holds no symmetry):
the search then sees one draw per position rather than a new one per visit.

A step whose positions are all in the table skips the network (``lax.cond``); a step
with any miss evaluates its whole batch (a batch has one shape) and keeps the stored
results of the hits, so that every position reads the same evaluation however its step
went.
"""

from __future__ import annotations

import zlib
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np

from gojax._board import GoState
from gojax._search_evaluators import Evaluator, evaluate_with_score

# Evaluations (evaluate_with_score's six arrays) of ``[N]`` positions.
Outputs = tuple[jax.Array, ...]


@flax.struct.dataclass
class NNCache:
    """A table of ``C = 2 ** size_log2`` evaluations and its counters."""

    keys: jax.Array  # [C, 2] uint32: the key of the position held in each slot
    filled: jax.Array  # [C] bool: whether the slot holds a position
    recent: jax.Array  # [C // 2] int32: each set's way (0, 1) used last
    outputs: Outputs  # evaluate_with_score's six arrays, each [C, ...]
    lookups: jax.Array  # [] int32: positions looked up since the table was made
    hits: jax.Array  # [] int32: of those, found in the table

    @property
    def size(self) -> int:
        return self.filled.shape[0]


def new_cache(evaluator: Evaluator, states: GoState, key: jax.Array, size_log2: int) -> NNCache:
    """An empty table for ``evaluator``'s evaluations of positions shaped as ``states``
    (``[B]``, any ``B``; only their shapes are read, nothing is evaluated)."""
    if not 1 <= int(size_log2) <= 30:
        raise ValueError(f"the network cache's size_log2 must be 1..30, not {size_log2}")
    size = 2 ** int(size_log2)
    shapes = jax.eval_shape(lambda s, k: evaluate_with_score(evaluator, s, k), states, key)
    return NNCache(
        keys=jnp.zeros((size, 2), jnp.uint32),
        filled=jnp.zeros((size,), bool),
        recent=jnp.zeros((size // 2,), jnp.int32),
        outputs=tuple(jnp.zeros((size,) + x.shape[1:], x.dtype) for x in shapes),
        lookups=jnp.zeros((), jnp.int32),
        hits=jnp.zeros((), jnp.int32),
    )


def _words(leaf: jax.Array, batch: int) -> jax.Array:
    """``[N, ...]`` array -> ``[N, M]`` uint32 words holding its bits."""
    x = jnp.asarray(leaf).reshape(batch, -1)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    if x.dtype == jnp.uint32:
        return x
    return jax.lax.bitcast_convert_type(x.astype(jnp.int32), jnp.uint32)


def position_keys(states: GoState) -> jax.Array:
    """``[N]`` states -> ``[N, 2]`` uint32 keys (see the module docstring).

    Each key word is a sum, modulo 2 ** 32, of the state's words each times its own
    fixed odd multiplier (the product's high bits folded into its low ones), plus a
    checksum of the static part of the state (size, rules): two inputs that differ
    collide in a word with chance about 2 ** -32, in both with about 2 ** -64 (the
    slots' spread was checked against a uniform one on random 9x9 positions). The
    multipliers are constants of the program (a fixed seed), so keys agree between
    programs and processes.
    """
    leaves, treedef = jax.tree.flatten(states)
    batch = leaves[0].shape[0]
    words = jnp.concatenate([_words(leaf, batch) for leaf in leaves], axis=1)  # [N, M]
    # A word's position matters: each gets its own multipliers.
    rng = np.random.default_rng(0x6E6E_CAC4E)
    multipliers = rng.integers(0, 2**32, size=(2, words.shape[1]), dtype=np.uint64)
    multipliers = jnp.asarray((multipliers | 1).astype(np.uint32))
    salt = zlib.crc32(repr(treedef).encode())
    mixed = words[:, None, :] * multipliers[None]  # [N, 2, M], wrapping
    # One word's bits spread over the key before the sum (a plain linear hash maps
    # differences in high bits alone to few key bits).
    mixed = mixed ^ (mixed >> 15)
    return jnp.sum(mixed, axis=2, dtype=jnp.uint32) + jnp.uint32(salt)


def _slot_owners(slots: jax.Array, write: jax.Array, size: int) -> jax.Array:
    """``[N]`` bool: the rows that write their slot, one per slot among ``write`` (the
    last such row), so that a slot's key and outputs come from one position."""
    rows = jnp.arange(slots.shape[0], dtype=jnp.int32)
    owner = (
        jnp.full((size,), -1, jnp.int32).at[jnp.where(write, slots, size)].max(rows, mode="drop")
    )
    return write & (owner[slots] == rows)


def cached_evaluate(
    evaluator: Evaluator, cache: NNCache | None, states: GoState, key: jax.Array
) -> tuple[Outputs, NNCache | None]:
    """``evaluate_with_score(evaluator, states, key)`` through ``cache``; returns the
    evaluations of the ``[N]`` states and the table with the new ones stored (the
    evaluator alone, and None, without a table)."""
    if cache is None:
        return evaluate_with_score(evaluator, states, key), None
    size = cache.size
    keys = position_keys(states)  # [N, 2]
    sets = (keys[:, 0] & jnp.uint32(size // 2 - 1)).astype(jnp.int32)
    first = 2 * sets  # the set's two slots: first, first + 1

    def holds(slot):
        return cache.filled[slot] & jnp.all(cache.keys[slot] == keys, axis=1)

    second = holds(first + 1)
    hit = holds(first) | second
    # A hit reads its slot; a miss takes the set's least recently used one.
    slots = first + jnp.where(hit, second, 1 - cache.recent[sets])
    stored = tuple(x[slots] for x in cache.outputs)

    def evaluated() -> Outputs:
        fresh = evaluate_with_score(evaluator, states, key)

        def keep(old, new):
            return jnp.where(hit.reshape(hit.shape + (1,) * (new.ndim - 1)), old, new)

        pairs = zip(stored, fresh, strict=True)
        return tuple(keep(old, new.astype(old.dtype)) for old, new in pairs)

    outputs = jax.lax.cond(jnp.all(hit), lambda: stored, evaluated)
    write = _slot_owners(slots, ~hit, size)
    at = jnp.where(write, slots, size)  # out of range: dropped

    def put(table, rows):
        return table.at[at].set(rows, mode="drop")

    cache = cache.replace(
        keys=put(cache.keys, keys),
        filled=put(cache.filled, jnp.ones_like(hit)),
        recent=cache.recent.at[sets].set(slots - first),
        outputs=tuple(put(t, o) for t, o in zip(cache.outputs, outputs, strict=True)),
        lookups=cache.lookups + hit.shape[0],
        hits=cache.hits + jnp.sum(hit, dtype=jnp.int32),
    )
    return outputs, cache


def cache_stats(*caches: Any) -> dict[str, int]:
    """Tables' counters on the host, summed: ``{"lookups", "hits", "size", "filled"}``
    (all 0 for no table)."""
    total = {"lookups": 0, "hits": 0, "size": 0, "filled": 0}
    for cache in caches:
        total["lookups"] += int(cache.lookups)
        total["hits"] += int(cache.hits)
        total["size"] += int(cache.size)
        total["filled"] += int(jnp.sum(cache.filled))
    return total
