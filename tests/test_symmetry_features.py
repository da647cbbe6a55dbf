"""Symmetries (KataGo's numbering) and AlphaGo Zero's 17 input planes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gojax


@pytest.mark.parametrize("size", [2, 5, 9, 19])
def test_symmetries_form_the_dihedral_group(size):
    grid = jnp.arange(size * size)
    images = {tuple(np.asarray(gojax.transform_board(grid, s))) for s in range(8)}
    assert len(images) == 8 if size > 1 else 1
    for s in range(8):
        back = gojax.transform_board(gojax.transform_board(grid, s), gojax.inverse_symmetry(s))
        np.testing.assert_array_equal(back, grid)


def test_katago_numbering_on_a_corner():
    # (row, col) of the top-left corner (0, 0) under each symmetry, on 9x9.
    expected = [(0, 0), (8, 0), (0, 8), (8, 8), (0, 0), (0, 8), (8, 0), (8, 8)]
    got = [gojax.symmetric_point(0, 0, 9, s) for s in range(8)]
    assert got == expected
    # 5 and 6 are the two quarter turns, each the other's inverse.
    assert gojax.symmetric_point(0, 1, 9, 5) == (1, 8)
    assert gojax.symmetric_point(1, 8, 9, 6) == (0, 1)


def test_transform_board_moves_values_where_symmetric_point_says():
    size = 5
    values = jnp.zeros(size * size).at[1 * size + 3].set(1.0)  # row 1, col 3
    for s in range(8):
        out = np.asarray(gojax.transform_board(values, s))
        row, col = gojax.symmetric_point(1, 3, size, s)
        assert out[row * size + col] == 1.0 and out.sum() == 1.0


def test_policy_pass_stays_and_actions_agree_with_boards():
    size = 7
    policy = jnp.arange(size * size + 1, dtype=jnp.float32)
    for s in range(8):
        out = gojax.transform_policy(policy, s)
        assert float(out[-1]) == size * size
        for action in (0, 10, 48):
            moved = int(gojax.transform_action(action, size, s))
            assert float(out[moved]) == action
        assert int(gojax.transform_action(size * size, size, s)) == size * size


def test_traced_symmetry_under_vmap():
    size = 9
    boards = jnp.tile(jnp.arange(size * size)[None], (8, 1))
    out = jax.jit(jax.vmap(gojax.transform_board))(boards, jnp.arange(8))
    for s in range(8):
        np.testing.assert_array_equal(out[s], gojax.transform_board(boards[0], s))


def test_transform_planes_matches_flat_boards():
    size = 6
    planes = jax.random.normal(jax.random.key(0), (size, size, 3))
    for s in range(8):
        out = gojax.transform_planes(planes, s)
        for c in range(3):
            np.testing.assert_allclose(
                out[:, :, c].reshape(-1), gojax.transform_board(planes[:, :, c].reshape(-1), s)
            )


def test_agz_planes_follow_the_paper_layout():
    size = 5
    state = gojax.new_game(size, rules="chinese")
    moves = ["C3", "B2", "D4"]  # B, W, B: White is to play after them
    for vertex in moves:
        state = gojax.play(state, gojax.gtp_to_action(vertex, size))
    planes = np.asarray(gojax.agz_planes(state))
    assert planes.shape == (size, size, gojax.AGZ_PLANES) == (5, 5, 17)

    def at(vertex):
        return divmod(gojax.gtp_to_action(vertex, size), size)

    # Plane 0: stones of the player to move (White) now; plane 1: the opponent's.
    assert planes[at("B2") + (0,)] == 1 and planes[:, :, 0].sum() == 1
    assert planes[at("C3") + (1,)] == 1 and planes[at("D4") + (1,)] == 1
    assert planes[:, :, 1].sum() == 2
    # One move ago (before D4): Black had only C3.
    assert planes[:, :, 3].sum() == 1 and planes[at("C3") + (3,)] == 1
    # Three moves ago: the empty board; and beyond.
    assert planes[:, :, 6:16].sum() == 0
    # Colour plane: White to play → zeros.
    assert planes[:, :, 16].sum() == 0
    black_to_play = gojax.agz_planes(gojax.new_game(size))
    assert float(black_to_play[:, :, 16].min()) == 1.0


def test_agz_planes_with_short_history_pad_with_empty_boards():
    state = gojax.new_game(5, history=2)
    for vertex in ["C3", "B2", "D4"]:
        state = gojax.play(state, gojax.gtp_to_action(vertex, 5))
    planes = gojax.agz_planes(state)
    assert planes.shape == (5, 5, 17)
    assert float(planes[:, :, 6:16].sum()) == 0.0
