"""Move sets narrower than the rules' legal moves, for searches and rollouts.

A Monte-Carlo player that may pass at any time or fill its own eyes wastes
most of its games: random play fills its eyes until every group dies, and an
untrained network that passes early ends games before anything is decided
(with area scoring the side that happens to be ahead wins, so self-play can
settle into passing and learn nothing). Every Monte-Carlo Go program kept
one piece of knowledge against this -- do not fill your own single-point
eyes -- and self-play engines for small budgets add a pass rule.

* :func:`own_eyes`: empty points all of whose neighbours are the mover's
  stones or the edge (single-point eyes, false eyes included).
* :func:`sensible_moves`: legal moves that fill none of them; pass when the
  opponent has just passed (so that a won game can be ended) or when no
  other move is left. Everything that ends a game by the rules stays
  reachable: two passes, and the move cap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gojax._board import EMPTY, GoState, legal_moves, neighbor_table

__all__ = ["own_eyes", "sensible_moves"]

_OFF_BOARD = 2


def own_eyes(state: GoState) -> jax.Array:
    """``[P]`` bool: empty points whose every neighbour is the mover's stone or the edge."""
    neighbours = jnp.append(state.board, jnp.int8(_OFF_BOARD))[neighbor_table(state.size)]
    own = (neighbours == state.to_play) | (neighbours == _OFF_BOARD)
    return (state.board == EMPTY) & jnp.all(own, axis=-1)


def sensible_moves(state: GoState) -> jax.Array:
    """``[P + 1]`` bool: legal moves minus own-eye fills; pass only after a pass or if nothing else.

    Empty for a finished game (as ``legal_moves``).
    """
    legal = legal_moves(state)
    points = legal[:-1] & ~own_eyes(state)
    may_pass = legal[-1] & ((state.passes > 0) | ~jnp.any(points))
    return jnp.append(points, may_pass)
