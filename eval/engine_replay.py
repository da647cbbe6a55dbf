"""A game's moves replayed for the GTP engine in compiled segments (``loadsgf``, and
``komi`` or ``kata-set-rules`` in mid-game).

Played one by one, each move costs the engine a legality test and a move, each a
dispatch of its own and a wait for the answer: about half a millisecond a move.
Here one compiled scan plays ``SEGMENT`` moves at a time and the legality of
every move comes back at the end, about ten times faster; the one compilation
per board size and rule set is paid by the first long replay.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gojax import GoState, legal_moves, play

SEGMENT = 32  # moves a compiled scan plays: one program serves every game length


def _resumed(state: GoState, colour: jax.Array) -> GoState:
    """The position ``colour`` moves from, as ``Engine.play`` makes it: after two passes
    the game goes on, and a move out of turn hands ``colour`` the move and lifts the ko."""
    over = state.terminated
    state = state.replace(
        terminated=jnp.zeros_like(over),
        passes=jnp.where(over, jnp.zeros_like(state.passes), state.passes),
    )
    out_of_turn = colour != state.to_play
    return state.replace(
        to_play=colour.astype(state.to_play.dtype),
        ko=jnp.where(out_of_turn, jnp.asarray(-1, state.ko.dtype), state.ko),
    )


@jax.jit
def _segment(state, illegal, start, colours, actions, count):
    """Moves ``start..start + SEGMENT`` (those below ``count``): ``(state after them,
    first illegal move so far (-1: none), [SEGMENT] states before each move)``.
    Nothing is played from the first illegal move on."""

    def step(carry, move):
        state, illegal = carry
        index, colour, action = move
        active = (index < count) & (illegal < 0)
        mover = _resumed(state, colour)
        legal = legal_moves(mover)[action]
        after = play(mover, action)
        keep = active & legal
        state_after = jax.tree.map(lambda new, old: jnp.where(keep, new, old), after, state)
        illegal = jnp.where(active & ~legal, index, illegal)
        return (state_after, illegal), state

    indices = start + jnp.arange(colours.shape[0], dtype=jnp.int32)
    (state, illegal), before = jax.lax.scan(step, (state, illegal), (indices, colours, actions))
    return state, illegal, before


def replay_moves(
    state: GoState, colours: list[int], actions: list[int]
) -> tuple[GoState, list[GoState], int]:
    """Play ``actions`` (``colours[i]`` +1/-1 moves ``actions[i]``) from ``state``.

    The caller keeps the game below ``state.max_moves`` (no restart at the cap
    here) and the actions on the board or pass.

    Returns:
      ``(final, before, illegal)``: the position after the moves, the position
      before each move (host arrays, as ``Engine.history`` keeps them) and the
      index of the first illegal move (-1 if none; ``final`` and ``before``
      then mean nothing).
    """
    count = len(actions)
    padded = -(-count // SEGMENT) * SEGMENT
    pass_action = state.num_actions - 1
    colour_array = np.ones(padded, np.int8)
    action_array = np.full(padded, pass_action, np.int32)
    colour_array[:count], action_array[:count] = colours, actions
    illegal = jnp.asarray(-1, jnp.int32)
    segments = []
    for start in range(0, padded, SEGMENT):
        part = slice(start, start + SEGMENT)
        state, illegal, before = _segment(
            state,
            illegal,
            jnp.asarray(start, jnp.int32),
            colour_array[part],
            action_array[part],
            jnp.asarray(count, jnp.int32),
        )
        segments.append(before)
    # One transfer for every earlier position; a move's own is a view into it.
    host = jax.device_get(segments)
    history = [
        jax.tree.map(lambda x, i=i: x[i], segment) for segment in host for i in range(SEGMENT)
    ]
    return state, history[:count], int(illegal)
