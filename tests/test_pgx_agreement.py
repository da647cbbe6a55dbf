"""Agreement with pgx's Go on batched random games.

What pgx 2.x implements (read from ``pgx/_src/games/go.py``):

* ``state._x.board`` holds chain ids, positive for Black and negative for
  White, in absolute colours (not relative to the player to move);
  ``state._x.color`` is 0 when Black is to move.
* Action ``a`` is the point ``a`` of the flat row-major board (``a // size``
  is the row), the same index as gojax's; ``size * size`` is pass. The tests
  below check the indexing empirically.
* ``legal_action_mask``: empty, not suicide (suicide is always forbidden), not
  the simple-ko point; pass always legal. Positional superko is *not* in the
  mask: it is checked after the move, and a move that repeats a position ends
  the game and loses. So pgx's mask should equal our ``chinese`` preset
  (simple ko, no suicide) until pgx says the game is over.
* Area scoring, komi 7.5, the game ends after two passes or ``2 * size *
  size`` moves (our default move cap). pgx's area gives a player every empty
  point that cannot reach an opponent stone, so on an empty board both
  players have the whole board where Tromp-Taylor gives nobody anything; on
  a board with stones the two counts are the same.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, jit_legal, jit_play, new_game

import gojax

pgx = pytest.importorskip("pgx")
pgx_go = pytest.importorskip("pgx._src.games.go")


def _pgx_game_state(state):
    return getattr(state, "_x", state)


def pgx_stones(state) -> jax.Array:
    """pgx's board as +1 black, -1 white, 0 empty."""
    x = _pgx_game_state(state)
    board = x.board if hasattr(x, "board") else x._board
    return jnp.sign(board).astype(jnp.int8)


def pgx_to_play(state) -> jax.Array:
    """+1 when Black is to move in pgx."""
    x = _pgx_game_state(state)
    color = x.color if hasattr(x, "color") else x._turn
    return jnp.where(color == 0, 1, -1).astype(jnp.int8)


def pgx_area(state, size: int) -> jax.Array:
    """pgx's own area count ``[black, white]``."""
    return pgx_go._count_scores(_pgx_game_state(state), size)


def test_pgx_defaults_and_indexing():
    env = pgx.make("go_9x9")
    assert env._game.komi == 7.5
    assert env._game.max_termination_steps == 2 * 81
    assert new_game(9).max_moves == 2 * 81
    state = env.init(jax.random.key(0))
    assert state.legal_action_mask.shape == (82,)
    step = jax.jit(env.step)
    ours = new_game(9, rules="chinese")
    # Black 1, White 0 (top-left corner), Black 9 (below it): the corner is taken.
    for action in (1, 0, 9):
        state = step(state, jnp.int32(action))
        ours = jit_play(ours, action)
        np.testing.assert_array_equal(np.asarray(pgx_stones(state)), np.asarray(ours.board))
        assert np.asarray(pgx_stones(state))[action] != 0
    assert np.asarray(ours.board)[0] == 0
    assert gojax.action_to_gtp(0, 9) == "A9" and gojax.action_to_gtp(9, 9) == "A8"
    assert int(pgx_to_play(state)) == int(ours.to_play) == -1
    np.testing.assert_array_equal(np.asarray(state.legal_action_mask), np.asarray(jit_legal(ours)))


@functools.cache
def agreement_runner(size: int, steps: int, *, optimize: bool = False):
    """``keys [B] → per-game, per-ply records`` of pgx and gojax playing the same random moves.

    ``optimize`` compiles with XLA's full optimisation: slower to compile, but
    pgx's O(P²) chain bookkeeping then runs several times faster, which pays
    on 19x19.
    """
    env = pgx.make(f"go_{size}x{size}")
    p = size * size

    def one_game(key):
        init_key, key = jax.random.split(key)
        start = (env.init(init_key), gojax.new_game(size, rules="chinese", komi=7.5))

        def step(carry, key):
            theirs, ours = carry
            their_mask = theirs.legal_action_mask
            our_mask = gojax.legal_moves(ours)
            both = their_mask & our_mask
            action = jax.random.categorical(key, jnp.where(both, 0.0, -jnp.inf))
            action = jnp.where(both.any(), action, p).astype(jnp.int32)
            record = dict(
                their_board=pgx_stones(theirs),
                our_board=ours.board,
                their_to_play=pgx_to_play(theirs),
                our_to_play=ours.to_play,
                their_mask=their_mask,
                our_mask=our_mask,
                their_terminated=theirs.terminated,
                our_terminated=ours.terminated,
                their_area=pgx_area(theirs, size),
                our_area=gojax.area(ours),
                our_captures=ours.captures,
                action=action,
            )
            return (env.step(theirs, action), gojax.play(ours, action)), record

        _, records = jax.lax.scan(step, start, jax.random.split(key, steps))
        return records

    compiled = (jax.jit if optimize else fast_jit)(jax.vmap(one_game))

    def run(seed: int, games: int) -> dict[str, np.ndarray]:
        out = compiled(jax.random.split(jax.random.key(seed), games))
        return {name: np.asarray(value) for name, value in out.items()}

    return run


def _names(mask: np.ndarray, size: int) -> list[str]:
    return [gojax.action_to_gtp(int(a), size) for a in np.flatnonzero(mask)]


def _compare(records: dict[str, np.ndarray], size: int) -> int:
    """Assert agreement on every ply before pgx ends the game; return the plies compared."""
    p = size * size
    games, steps = records["action"].shape
    compared = 0
    for g in range(games):
        for t in range(steps):
            if records["their_terminated"][g, t]:
                break
            where = f"game {g} ply {t}"
            their_board = records["their_board"][g, t]
            our_board = records["our_board"][g, t]
            if not np.array_equal(their_board, our_board):
                diff = _names(their_board != our_board, size)
                raise AssertionError(f"{where}: boards differ at {diff}")
            assert records["their_to_play"][g, t] == records["our_to_play"][g, t], where
            assert not records["our_terminated"][g, t], where
            their_mask, our_mask = records["their_mask"][g, t], records["our_mask"][g, t]
            if not np.array_equal(their_mask, our_mask):
                only_pgx = _names(their_mask & ~our_mask, size)
                only_ours = _names(our_mask & ~their_mask, size)
                raise AssertionError(
                    f"{where}: legal only for pgx {only_pgx}, only for gojax {only_ours}\n"
                    f"{our_board.reshape(size, size)}"
                )
            if our_board.any():  # see the module docstring for the empty board
                np.testing.assert_array_equal(
                    records["their_area"][g, t], records["our_area"][g, t], err_msg=where
                )
            assert their_mask[p]
            compared += 1
    return compared


def test_agreement_9x9():
    records = agreement_runner(9, 150)(seed=9, games=32)
    compared = _compare(records, 9)
    assert compared > 32 * 100  # most games run long before pgx ends them
    # The random games are real games: stones get captured (and kos get taken).
    assert (records["our_captures"][:, -1].sum(axis=-1) > 0).all()


@pytest.mark.slow
def test_agreement_19x19():
    records = agreement_runner(19, 60, optimize=True)(seed=19, games=32)
    assert _compare(records, 19) == 32 * 60
