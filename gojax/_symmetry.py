"""The 8 symmetries of the square board, numbered as KataGo numbers them.

A symmetry ``s`` has three bits, applied in this order: bit 0 flips rows
(top ↔ bottom), bit 1 flips columns (left ↔ right), bit 2 then transposes.
So 0 is the identity, 3 the 180° rotation, 4 the transpose, 5 and 6 the two
90° rotations (each the other's inverse) and 7 the anti-transpose.

Transforming moves a value at point ``(row, col)`` to ``symmetric_point``.
``s`` may be a Python int or a traced integer (a random symmetry per
position): the work is one gather with a static permutation table.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

NUM_SYMMETRIES = 8
_INVERSE = (0, 1, 2, 3, 4, 6, 5, 7)


def symmetric_point(row: int, col: int, size: int, symmetry: int) -> tuple[int, int]:
    """Where ``(row, col)`` goes under ``symmetry``.

    >>> symmetric_point(0, 0, 9, 5)  # a 90° rotation takes top-left to top-right
    (0, 8)
    """
    if symmetry & 1:
        row = size - 1 - row
    if symmetry & 2:
        col = size - 1 - col
    if symmetry & 4:
        row, col = col, row
    return row, col


def inverse_symmetry(symmetry):
    """The symmetry that undoes ``symmetry`` (5 and 6 swap; the rest are involutions)."""
    if isinstance(symmetry, int | np.integer):
        return _INVERSE[symmetry]
    return jnp.asarray(_INVERSE)[symmetry]


@functools.cache
def symmetry_gather_table(size: int) -> np.ndarray:
    """``[8, P]`` int32: ``out[i] = x[table[s, i]]`` applies symmetry ``s`` to a flat board."""
    p = size * size
    table = np.zeros((NUM_SYMMETRIES, p), np.int32)
    for s in range(NUM_SYMMETRIES):
        for point in range(p):
            row, col = symmetric_point(*divmod(point, size), size, s)
            table[s, row * size + col] = point
    return table


def transform_board(values: jax.Array, symmetry) -> jax.Array:
    """Apply ``symmetry`` to ``[..., P]`` flat per-point values (boards, ownership)."""
    size = int(round(values.shape[-1] ** 0.5))
    index = jnp.asarray(symmetry_gather_table(size))[symmetry]
    return jnp.take(values, index, axis=-1)


def transform_planes(planes: jax.Array, symmetry) -> jax.Array:
    """Apply ``symmetry`` to ``[N, N, C]`` feature planes (channels last)."""
    size = planes.shape[0]
    flat = planes.reshape((size * size,) + planes.shape[2:])
    index = jnp.asarray(symmetry_gather_table(size))[symmetry]
    return jnp.take(flat, index, axis=0).reshape(planes.shape)


def transform_policy(policy: jax.Array, symmetry) -> jax.Array:
    """Apply ``symmetry`` to ``[..., P + 1]`` move values; pass (the last entry) stays."""
    board = transform_board(policy[..., :-1], symmetry)
    return jnp.concatenate([board, policy[..., -1:]], axis=-1)


def transform_action(action, size: int, symmetry):
    """Apply ``symmetry`` to an action index (pass stays pass)."""
    p = size * size
    # The gather table maps destination → source, so the inverse maps source → destination.
    destination = jnp.asarray(symmetry_gather_table(size))[inverse_symmetry(symmetry)]
    action = jnp.asarray(action)
    return jnp.where(action == p, p, destination[jnp.minimum(action, p - 1)])
