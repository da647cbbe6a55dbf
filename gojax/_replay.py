"""Replaying a move list as one jitted scan."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gojax._board import GoState, legal_moves, play


@jax.jit
def replay(state: GoState, actions: jax.Array, num_moves: jax.Array):
    """Play ``actions[:num_moves]`` from ``state`` in one scan.

    Args:
      state: the starting position.
      actions: ``[T]`` int32 actions; entries from ``num_moves`` on are ignored
        (padding lets games of different lengths share one compiled program).
      num_moves: ``[]`` int32, how many actions to play.

    Returns:
      ``(final_state, boards_before, legal_before, was_legal)``: the position
      after the moves, ``[T, P]`` int8 boards and ``[T, P + 1]`` bool legal
      moves before each action, and ``[T]`` bool whether each played action
      was legal there.
    """

    def step(current, inputs):
        index, action = inputs
        legal = legal_moves(current)
        current_board = current.board
        active = index < num_moves
        following = play(current, action)
        current = jax.tree.map(lambda new, old: jnp.where(active, new, old), following, current)
        return current, (current_board, legal, legal[action] | ~active)

    indices = jnp.arange(actions.shape[0])
    final, (boards, legal, was_legal) = jax.lax.scan(step, state, (indices, actions))
    return final, boards, legal, was_legal
