"""KataGo's root symmetry pruning: at a symmetric position, search one move of each
set of equivalent moves.

On an empty board the 8 symmetries of the square make the four corners' 4-4
points one move; a search that treats them as four spends four times the
visits learning the same thing. KataGo (``rootSymmetryPruning``, on by
default in its GTP and analysis engines) finds the symmetries under which the
root position is unchanged, searches the first move of each orbit in a fixed
order and keeps the others out of the root, then reports every move of the
orbit with the searched one's numbers (``isSymmetryOf``).

A symmetry counts here when it maps the stones onto themselves and the legal
moves onto legal moves, and there is no simple-ko ban (KataGo requires no ko
or superko ban at all; a superko ban that the symmetry does not preserve is
refused here too, one it preserves is accepted). The history the network sees
is not symmetric and is ignored, as KataGo ignores it.

The first move of an orbit follows KataGo's order: for Black the columns from
the right, each from the top, so that Black's first move lands in the upper
right; for White the columns from the left, each from the bottom.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from gojax._board import BLACK, GoState
from gojax._symmetry import NUM_SYMMETRIES, inverse_symmetry, symmetry_gather_table


@functools.cache
def _images(size: int) -> np.ndarray:
    """``[8, P]`` int32: the point each point goes to under each symmetry (the gather
    table of the inverse symmetry)."""
    inverses = [inverse_symmetry(s) for s in range(NUM_SYMMETRIES)]
    return symmetry_gather_table(size)[inverses]


@functools.cache
def _ranks(size: int) -> np.ndarray:
    """``[2, P]`` int32: each point's place in KataGo's order, for Black (row 0) and
    White (row 1): Black's columns from the right, each from the top; White's columns
    from the left, each from the bottom."""
    rows, cols = np.divmod(np.arange(size * size), size)
    black = (size - 1 - cols) * size + rows
    white = cols * size + (size - 1 - rows)
    return np.stack([black, white]).astype(np.int32)


def root_symmetries(state: GoState, legal: jnp.ndarray) -> jnp.ndarray:
    """``[8]`` bool: the symmetries (KataGo's numbering, ``gojax._symmetry``) under which
    one position (``state`` unbatched, ``legal [A]`` its moves) is unchanged: the stones
    onto themselves, the legal moves onto legal moves, no ko ban. The identity always."""
    images = jnp.asarray(_images(state.size))  # [8, P]
    p = state.size * state.size
    stones = jnp.all(state.board[images] == state.board[None], axis=1)
    moves = jnp.all(legal[:p][images] == legal[None, :p], axis=1)
    symmetric = stones & moves & (state.ko < 0)
    return symmetric.at[0].set(True)


def duplicate_moves(
    state: GoState, legal: jnp.ndarray, symmetries: jnp.ndarray | None = None
) -> jnp.ndarray:
    """``[A]`` bool: the moves of one position (``legal [A]``, the moves the search may
    play there) that another of them earlier in KataGo's order stands for under one
    of the position's ``symmetries [8]`` (default: :func:`root_symmetries` of ``legal``;
    give those of the moves before any are kept out, as KataGo: an avoided move then
    stands for none of its images, which are searched); False for pass and where there
    is no symmetry. Jittable; ``jax.vmap`` it for a batch."""
    size = state.size
    p = size * size
    images = jnp.asarray(_images(size))  # [8, P]
    rank = jnp.asarray(_ranks(size))[jnp.where(state.to_play == BLACK, 0, 1)]  # [P]
    valid = root_symmetries(state, legal) if symmetries is None else symmetries  # [8]
    others = valid[:, None] & (images != jnp.arange(p)[None]) & legal[:p][images]
    image_rank = jnp.where(others, rank[images], p)  # [8, P] rank of each legal image
    earlier = jnp.min(image_rank, axis=0) < rank  # an equivalent move comes first
    return jnp.concatenate([earlier & legal[:p], jnp.zeros((1,), bool)])


def symmetric_moves(action: int, size: int, symmetries: np.ndarray) -> list[tuple[int, int]]:
    """``(symmetry, action)`` for each move equivalent to ``action`` under the valid
    ``symmetries [8]`` (host bools), the identity first, each move once; pass is its own."""
    if action >= size * size:
        return [(0, action)]
    seen, out = set(), []
    images = _images(size)
    for s in np.flatnonzero(symmetries):
        image = int(images[s, action])
        if image not in seen:
            seen.add(image)
            out.append((int(s), image))
    return out


def transform_point_values(values: np.ndarray, size: int, symmetry: int) -> np.ndarray:
    """``[..., P]`` per-point values (an ownership map) as seen after ``symmetry``: the
    value at each point moves to that point's image."""
    return np.asarray(values)[..., symmetry_gather_table(size)[symmetry]]


def transform_actions(actions: tuple[int, ...], size: int, symmetry: int) -> tuple[int, ...]:
    """Moves (a principal variation) under ``symmetry``; pass stays pass."""
    images = _images(size)[symmetry]
    return tuple(int(images[a]) if a < size * size else int(a) for a in actions)
