"""Territory scoring as KataGo counts it (``japanese``: SCORING_TERRITORY, TAX_SEKI).

Written for one board and batched with ``jax.vmap``; shapes are static.

KataGo counts a territory game that ends by two passes without its cleanup
phase (``BoardHistory::countTerritoryAreaScoreWhiteMinusBlack``) as:

1. *Basic area*: ``calculateArea`` with every flag on (the area of input planes
   18/19, :func:`gojax._pass_alive.area_ownership`): pass-alive groups and
   their territory, regions bordered by one colour only, and every other stone
   for its own colour. Dead stones leave the board only inside pass-alive area.
2. *Independent life* (``calculateIndependentLifeAreaHelper``): a connected
   piece of one player's basic area is in *seki* when one of its points touches
   dame (an empty point of nobody's area) or is a stone of that player in
   atari. Seki pieces count for nobody.
3. The points of the other pieces count for their owner; stones outside them
   (in seki, or on dame-bordered boards) count for their own colour.
4. ``whiteBonusScore``: one point to White for every stone Black ever placed
   and one to Black for every White stone. This turns stones counted on the
   board into prisoners: with ``B_on``/``W_on`` stones on the board and
   ``capB``/``capW`` stones captured by Black/White, Black placed
   ``B_on + capW`` stones and White ``W_on + capB``.

So a dead stone left inside pass-alive territory costs its owner two points
(the point and the prisoner) and seki eyes count for nobody, as the Japanese
rules have it. KataGo feeds the same bonus to the net as part of the komi
(global input 5), so :func:`white_bonus` serves both.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from gojax._board import BLACK, WHITE, GoState, neighbor_table
from gojax._pass_alive import _components, area_ownership

__all__ = ["independent_life_area", "territory_score", "white_bonus"]


def independent_life_area(board: jax.Array, liberties: jax.Array) -> jax.Array:
    """KataGo's ``calculateIndependentLifeArea`` (keep neither territories nor stones).

    Args:
      board: ``[P]`` int8 stones (+1 black, -1 white, 0 empty), ``P = N * N``.
      liberties: ``[P]`` liberties of the chain of each stone (0 on empty points).

    Returns:
      ``[P]`` int8: +1 / -1 where the point counts for Black / White by
      independent life, 0 where it counts for nobody (seki, dame).
    """
    board = jnp.asarray(board, jnp.int8)
    p = board.shape[-1]
    size = math.isqrt(p)
    nbrs = jnp.asarray(neighbor_table(size), jnp.int32)  # [P, 4], P off the board
    basic = area_ownership(board, multi_stone_suicide_legal=False)
    owned = basic != 0
    dame = (board == 0) & ~owned
    touches_dame = jnp.any(jnp.append(dame, False)[nbrs], axis=-1)
    in_atari = (board == basic) & (jnp.asarray(liberties) == 1)
    seed = owned & (touches_dame | in_atari)
    # Pieces: 4-connected points of the same (non-zero) basic owner.
    padded = jnp.append(basic, jnp.int8(0))
    same = (padded[nbrs] == basic[:, None]) & owned[:, None] & (nbrs < p)
    label = _components(same, nbrs, p)
    seki_piece = jnp.zeros(p, bool).at[label].max(seed)
    return jnp.where(owned & ~seki_piece[label], basic, jnp.int8(0))


def white_bonus(state: GoState) -> jax.Array:
    """``[]`` float32: stones Black placed minus White's (KataGo's ``whiteBonusScore``)."""
    black_on = jnp.sum(state.board == BLACK, dtype=jnp.int32)
    white_on = jnp.sum(state.board == WHITE, dtype=jnp.int32)
    # captures: [stones captured by Black (white stones), by White (black stones)]
    captures = state.captures.astype(jnp.int32)
    return (black_on + captures[1] - white_on - captures[0]).astype(jnp.float32)


def territory_score(state: GoState) -> jax.Array:
    """``[]`` float32: Black's margin by territory and prisoners with seki tax, komi included."""
    life = independent_life_area(state.board, state.liberties)
    counted = jnp.where(life != 0, life, state.board)  # stones outside independent life
    white_minus_black = -jnp.sum(counted, dtype=jnp.int32).astype(jnp.float32)
    return -(white_minus_black + white_bonus(state) + state.komi)
