"""AlphaGo Zero's input encoding (Silver et al. 2017, "Methods: Neural network architecture")."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gojax._board import BLACK, GoState

AGZ_HISTORY = 8
AGZ_PLANES = 2 * AGZ_HISTORY + 1  # 17


def agz_planes(state: GoState, dtype=jnp.float32) -> jax.Array:
    """``[N, N, 17]`` AlphaGo Zero input planes for the player to move.

    Planes ``2t`` and ``2t + 1`` hold the stones of the player to move and of
    the opponent ``t`` moves ago (``t = 0`` is now), the paper's
    ``X_t, Y_t`` interleaving; before the first move the history is empty.
    Plane 16 is all ones when Black is to play. The state must keep at least
    7 past boards (``new_game(history=7)``, the default); fewer are padded
    with empty boards.
    """
    size = state.size
    past = state.past_boards[: AGZ_HISTORY - 1]
    missing = AGZ_HISTORY - 1 - past.shape[0]
    boards = jnp.concatenate(
        [state.board[None], past, jnp.zeros((missing, size * size), past.dtype)]
    )  # [8, P]
    own = boards == state.to_play
    opponent = boards == -state.to_play
    stones = jnp.stack([own, opponent], axis=1).reshape(2 * AGZ_HISTORY, size * size)
    colour = jnp.full((1, size * size), state.to_play == BLACK)
    planes = jnp.concatenate([stones, colour]).astype(dtype)
    return planes.T.reshape(size, size, AGZ_PLANES)
