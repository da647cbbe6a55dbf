"""AlphaGo's (2016) feature planes and networks: gojax.alphago_planes, gojax.nn.AlphaGoNet."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import ascii_of, long_ladder, new_game, play_moves, position

import gojax
from gojax._moves import sensible_moves
from gojax._random_play import random_action
from gojax.nn import PRESETS, AlphaGoNet
from train import model as model_lib

STONES, ONES, TURNS, LIBERTIES = slice(0, 3), 3, slice(4, 12), slice(12, 20)
CAPTURES, SELF_ATARI, LIBS_AFTER = slice(20, 28), slice(28, 36), slice(36, 44)
LADDER_CAPTURE, LADDER_ESCAPE, SENSIBLE, ZEROS, COLOUR = 44, 45, 46, 47, 48

_planes = jax.jit(gojax.alphago_planes)


def planes(state) -> np.ndarray:
    """``[P, 49]`` planes of one state."""
    return np.asarray(_planes(state)).reshape(-1, gojax.ALPHAGO_PLANES)


def one_hot(index: int | None) -> list[float]:
    row = [0.0] * 8
    if index is not None:
        row[index] = 1.0
    return row


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _random_games(size: int, rules: str, count: int, moves: int, key: jax.Array):
    """``[count]`` games of random moves that do not fill their own eyes, ``moves`` in."""

    def step(states, key):
        keys = jax.random.split(key, count)
        legal = jax.vmap(sensible_moves)(states)
        actions = jax.vmap(random_action)(keys, legal)
        return jax.vmap(gojax.play)(states, actions), None

    start = jax.vmap(lambda _: gojax.new_game(size, rules=rules))(jnp.arange(count))
    states, _ = jax.lax.scan(step, start, jax.random.split(key, moves))
    return states


def random_positions(size: int, rules: str, count: int, seed: int, moves: int):
    """``count`` positions of random games (not filling their own eyes) ``moves`` moves in."""
    states = jax.device_get(_random_games(size, rules, count, moves, jax.random.PRNGKey(seed)))
    return [jax.tree.map(lambda x, i=i: x[i], states) for i in range(count)]


_play_everywhere = jax.jit(jax.vmap(gojax.play, in_axes=(None, 0)))


@pytest.mark.parametrize("rules", ["chinese", "tromp-taylor"])
def test_move_planes_are_what_playing_the_move_does(rules):
    """Capture size, self-atari and liberties after the move, at every legal point of
    random middle-game positions, against the position after ``gojax.play`` (Tromp-Taylor
    allows multi-stone suicide, which counts as self-atari)."""
    checked = suicides = 0
    for state in random_positions(7, rules, count=8, seed=1, moves=40):
        f = planes(state)
        legal = np.asarray(gojax.legal_moves(state))[:-1]
        me = int(state.to_play)
        after = jax.device_get(_play_everywhere(state, jnp.arange(legal.size)))
        own_before = int(np.sum(np.asarray(state.board) == me))
        for point in range(legal.size):
            if not legal[point]:
                assert not f[point, 20:44].any() and not f[point, SENSIBLE]
                continue
            board = after.board[point]
            captured = int(np.sum(np.asarray(state.board) == -me) - np.sum(board == -me))
            if board[point] == 0:  # suicide: the chain, the new stone with it, left the board
                libs, size = 0, own_before + 1 - int(np.sum(board == me))
                suicides += 1
            else:
                libs = int(after.liberties[point][point])
                size = int(np.sum(after.chain[point] == after.chain[point][point]))
            assert f[point, CAPTURES].tolist() == one_hot(min(captured, 7)), ascii_of(state)
            assert f[point, LIBS_AFTER].tolist() == one_hot(min(libs, 8) - 1 if libs else None)
            want_atari = one_hot(min(size, 8) - 1) if libs <= 1 else one_hot(None)
            assert f[point, SELF_ATARI].tolist() == want_atari
            checked += 1
    assert checked > 40
    assert (suicides > 0) == (rules == "tromp-taylor")


def test_stone_planes_turns_and_liberties():
    state = play_moves(new_game(5, rules="chinese"), "B C3", "W C4", "B D4", "W pass", "B B4")
    f = planes(state)  # White to play; Black played B4 last, D4 three turns ago
    at = lambda v: gojax.gtp_to_action(v, 5)
    assert f[:, ONES].all() and not f[:, ZEROS].any() and not f[:, COLOUR].any()
    assert f[at("C4"), STONES].tolist() == [1, 0, 0]  # White's stone: the mover's
    assert f[at("C3"), STONES].tolist() == [0, 1, 0] and f[at("A1"), STONES].tolist() == [0, 0, 1]
    assert f[at("B4"), TURNS].tolist() == one_hot(0)
    assert f[at("D4"), TURNS].tolist() == one_hot(2)
    assert f[at("C4"), TURNS].tolist() == one_hot(3)
    assert f[at("C3"), TURNS].tolist() == one_hot(4)
    assert f[at("A1"), TURNS].tolist() == one_hot(None)
    assert f[at("C4"), LIBERTIES].tolist() == one_hot(0)  # C5 only
    assert f[at("C3"), LIBERTIES].tolist() == one_hot(2)
    for _ in range(4):  # eight turns on, C3 is in the ">= 8" plane
        state = play_moves(state, "pass", "pass", check_legal=False)
        state = state.replace(passes=jnp.int8(0), terminated=jnp.bool_(False))
    assert planes(state)[at("C3"), TURNS].tolist() == one_hot(7)
    setup = position(". X\n. .", to_play="W")
    assert planes(setup)[1, TURNS].tolist() == one_hot(7)  # a setup stone is old


def test_ladder_capture_and_escape():
    """A white stone in a ladder that runs to the corners: Black's ladder capture is marked
    on both liberties, and White, in atari, has no escape; with a breaker on each
    staircase there is no capture, and extending is an escape."""
    at = lambda row, col: row * 9 + col
    for board, works in zip(long_ladder(9), (True, False), strict=True):
        f = planes(new_game(9, rules="chinese", board=board, to_play=gojax.BLACK))
        want = {at(3, 4), at(4, 5)} if works else set()
        assert set(np.flatnonzero(f[:, LADDER_CAPTURE])) == want
        assert not f[:, LADDER_ESCAPE].any()
        atari = board.copy()
        atari[at(3, 4)] = gojax.BLACK
        f = planes(new_game(9, rules="chinese", board=atari, to_play=gojax.WHITE))
        assert set(np.flatnonzero(f[:, LADDER_ESCAPE])) == (set() if works else {at(4, 5)})
        assert f[at(4, 5), LIBS_AFTER].tolist() == one_hot(1 if works else 2)
    # An extension to three liberties or more is an escape without a search.
    free = position(
        """
        . . . . .
        . . X . .
        . X O . .
        . . X . .
        . . . . .
        """,
        to_play="W",
    )
    assert set(np.flatnonzero(planes(free)[:, LADDER_ESCAPE])) == {gojax.gtp_to_action("D3", 5)}


def test_sensibleness_keeps_false_eyes_and_legal_moves_only():
    state = position(
        """
        . X . X O
        X X X X O
        . X . X O
        X O X X .
        . X . . .
        """,
        to_play="B",
    )
    f = planes(state)
    at = lambda v: gojax.gtp_to_action(v, 5)
    # Eyes: on the edge no White diagonal (A5, C5); inside the board at most one (C3).
    assert not f[at("A5"), SENSIBLE] and not f[at("C5"), SENSIBLE] and not f[at("C3"), SENSIBLE]
    # False eyes, White's B2 on their diagonal: on the edge (A3) and in the corner (A1).
    assert f[at("A3"), SENSIBLE] and f[at("A1"), SENSIBLE]
    legal = np.asarray(gojax.legal_moves(state))[:-1]
    assert f[:, SENSIBLE].sum() == legal.sum() - 3
    assert not (f[:, SENSIBLE] > legal).any()


def test_planes_follow_the_board_symmetries():
    """Every plane is per point: the planes of a transformed board are the transformed planes
    (boards set up afresh, so that no history, ko or superko ban tells them apart)."""
    for state in random_positions(9, "chinese", count=3, seed=2, moves=40):
        to_play = int(state.to_play)
        base = planes(new_game(9, rules="chinese", board=state.board, to_play=to_play))
        for sym in range(1, 8):
            board = gojax.transform_board(state.board, sym)
            got = planes(new_game(9, rules="chinese", board=board, to_play=to_play))
            want = gojax.transform_planes(jnp.asarray(base.reshape(9, 9, -1)), sym)
            np.testing.assert_array_equal(got, np.asarray(want).reshape(81, -1))


def test_alphago_net_shapes_parameters_and_the_colour_plane():
    net = PRESETS["alphago"]()
    assert isinstance(net, AlphaGoNet) and (net.filters, net.num_layers) == (192, 13)
    spec = model_lib.ModelSpec("alphago_tiny")
    assert spec.encoder == "alphago"
    variables = model_lib.init_variables(spec, jax.random.PRNGKey(0), size=9)
    assert variables["batch_stats"] == {}
    states = jax.tree.map(lambda *x: jnp.stack(x), *random_positions(9, "chinese", 2, 3, 20))
    inputs = jax.jit(functools.partial(model_lib.encode, spec))(states)
    assert inputs[0].shape == (2, 9, 9, 49)
    module = model_lib.build(spec)
    # Random biases, so that every layer passes something on.
    noisy = jax.tree.map(
        lambda x: x + 0.1 * jax.random.normal(jax.random.PRNGKey(1), x.shape), variables
    )
    forward = jax.jit(functools.partial(model_lib.forward, spec, module), static_argnums=2)
    out = forward(noisy, inputs, True)
    assert out["policy_logits"].shape == (2, 82) and out["value"].shape == (2,)
    flipped = (inputs[0].at[..., COLOUR].set(1.0 - inputs[0][..., COLOUR]),)
    other = forward(noisy, flipped, False)
    np.testing.assert_array_equal(other["policy_logits"], out["policy_logits"])  # 48 planes
    assert np.all(np.abs(np.asarray(other["value"]) - np.asarray(out["value"])) > 0)
    with pytest.raises(ValueError, match="takes 'alphago' inputs"):
        model_lib.ModelSpec("alphago_tiny", encoder="agz")
    with pytest.raises(ValueError, match="expected 49 input planes"):
        module.apply(variables, jnp.zeros((1, 9, 9, 17)))


def test_raw_inputs_ablation_sees_no_hand_made_feature():
    spec = model_lib.ModelSpec("alphago_tiny_raw")
    module = model_lib.build(spec)
    variables = model_lib.init_variables(spec, jax.random.PRNGKey(0), size=5)
    variables = jax.tree.map(
        lambda x: x + 0.1 * jax.random.normal(jax.random.PRNGKey(1), x.shape), variables
    )
    planes = jax.random.bernoulli(jax.random.PRNGKey(2), 0.5, (2, 5, 5, 49)).astype(jnp.float32)
    noise = jax.random.bernoulli(jax.random.PRNGKey(3), 0.5, (2, 5, 5, 36)).astype(jnp.float32)
    out = module.apply(variables, planes)
    same = module.apply(variables, planes.at[..., 12:48].set(noise))
    np.testing.assert_array_equal(same["policy_logits"], out["policy_logits"])
    np.testing.assert_array_equal(same["value"], out["value"])
    for seen in (slice(0, 3), slice(4, 12)):  # the stones, the turns since
        other = module.apply(variables, planes.at[..., seen].set(1.0 - planes[..., seen]))
        assert np.any(np.asarray(other["policy_logits"]) != np.asarray(out["policy_logits"]))
