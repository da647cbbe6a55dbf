"""Counting a position: Tromp-Taylor area, the score under the state's rules, the winner.

Apart from the board (``gojax._board``) because the score under territory rules
needs ``gojax._territory``, which builds on the board.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gojax._board import BLACK, EMPTY, WHITE, GoState, _shifts
from gojax._territory import territory_score


def _reaches(board: jax.Array, color: int, size: int) -> jax.Array:
    """``[P]`` bool: points of ``color`` and empty points connected to one through empty points."""
    empty = board == EMPTY

    def grow(reached):
        up, down, left, right = _shifts(reached.reshape(size, size), False)
        near = (up | down | left | right).reshape(-1)
        return reached | (empty & near)

    start = board == color
    reached, _ = jax.lax.while_loop(
        lambda carry: jnp.any(carry[0] != carry[1]),
        lambda carry: (grow(carry[0]), carry[0]),
        (grow(start), start),
    )
    return reached


@jax.jit
def area(state: GoState) -> jax.Array:
    """``[2]`` int32: Tromp-Taylor area of Black and White.

    A player's area is their stones plus the empty points that reach only
    their stones. Every stone on the board counts as alive.
    """
    size = state.size
    black = _reaches(state.board, BLACK, size)
    white = _reaches(state.board, WHITE, size)
    return jnp.stack(
        [
            jnp.sum(black & ~white, dtype=jnp.int32),
            jnp.sum(white & ~black, dtype=jnp.int32),
        ]
    )


@jax.jit
def score(state: GoState) -> jax.Array:
    """``[]`` float32: Black's margin, komi included.

    Area rules: the Tromp-Taylor count, area(Black) - area(White) - komi.
    Territory rules (``japanese``): territory and prisoners with no points in
    seki, as KataGo counts them (:mod:`gojax._territory`).
    """
    territory = state.rule_values.territory
    if territory is True:
        return territory_score(state)
    black, white = area(state)
    by_area = (black - white).astype(jnp.float32) - state.komi
    if territory is False:
        return by_area
    return jnp.where(territory, territory_score(state), by_area)


@jax.jit
def winner(state: GoState) -> jax.Array:
    """``[]`` int8: +1 if Black wins by :func:`score`, -1 if White does, 0 for a tie."""
    return jnp.sign(score(state)).astype(jnp.int8)
