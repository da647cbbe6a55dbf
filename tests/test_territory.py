"""Territory scoring (``japanese``) as KataGo counts it: ``gojax._territory``.

A pure-Python reference written from KataGo's ``calculateIndependentLifeArea``
(on top of test_pass_alive's reference ``calculateArea``) checks the jitted
version on random-play and random-stone positions; scripted positions check
what the count means: territory plus prisoners, dame next to an area voids it,
dead stones inside pass-alive area cost two points each.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import chains, fast_jit, neighbors, new_game, position
from test_pass_alive import _random_play_boards, _spread_positions, ref_calculate_area

import gojax
from gojax._territory import independent_life_area, white_bonus

B, W = 1, -1


def ref_independent_life(board: np.ndarray) -> np.ndarray:
    """KataGo's calculateIndependentLifeAreaHelper, point by point in scan order."""
    board = [int(v) for v in board]
    size = int(round(len(board) ** 0.5))
    nbrs = neighbors(size)
    basic = [int(v) for v in ref_calculate_area(np.array(board, np.int8))]
    libs = [int(v) for v in _liberties(np.array(board))]

    def flood(start, owner, marks):
        stack = [start]
        marks[start] = True
        while stack:
            point = stack.pop()
            for near in nbrs[point]:
                if basic[near] == owner and not marks[near]:
                    marks[near] = True
                    stack.append(near)

    seki = [False] * len(board)
    for point, owner in enumerate(basic):
        if owner == 0 or seki[point]:
            continue
        in_atari = board[point] == owner and libs[point] == 1
        by_dame = any(board[n] == 0 and basic[n] == 0 for n in nbrs[point])
        if in_atari or by_dame:
            flood(point, owner, seki)
    return np.array([o if o != 0 and not seki[i] else 0 for i, o in enumerate(basic)], np.int8)


@fast_jit
def _life_batch(boards, liberties):
    return jax.vmap(independent_life_area)(boards, liberties)


def _liberties(board: np.ndarray) -> np.ndarray:
    label, found = chains(board)
    return np.array([len(found[i].liberties) if i >= 0 else 0 for i in label], np.int16)


def _check(boards: np.ndarray) -> None:
    libs = np.stack([_liberties(b) for b in boards])
    got = np.asarray(_life_batch(jnp.asarray(boards, jnp.int8), jnp.asarray(libs)))
    for board, ours in zip(boards, got, strict=True):
        want = ref_independent_life(board)
        assert np.array_equal(ours, want), (board, ours, want)


@pytest.mark.parametrize("size", [7, 9])
def test_random_play_matches_reference(size):
    games = np.asarray(_random_play_boards(jax.random.key(100 + size), size, 6, 3 * size * size))
    positions = _spread_positions(games, 6)
    _check(positions)
    # The sample has areas that count and areas voided by dame or atari.
    life = [ref_independent_life(b) for b in positions]
    areas = [ref_calculate_area(b) for b in positions]
    voided = [np.any((a != 0) & (x == 0)) for a, x in zip(areas, life, strict=True)]
    counted = [np.any(x != 0) for x in life]
    assert sum(voided) >= 5 and sum(counted) >= 5


def test_random_stones_match_reference():
    rng = np.random.default_rng(11)
    for size in (2, 3, 5, 9, 13):
        boards = np.stack(
            [
                rng.choice(np.array([B, W, 0], np.int8), size=size * size, p=[d / 2, d / 2, 1 - d])
                for d in (0.3, 0.6, 0.85)
            ]
        )
        _check(boards)


_score = fast_jit(gojax.score)


def test_territory_plus_prisoners():
    state = position(
        """
        . . X O .
        . . X O .
        . . X O .
        . . X O .
        . . X O .
        """,
        rules="japanese",
        komi=0.5,
    )
    # Black: 10 points of territory, White 5: Black by 5 - 0.5.
    assert float(_score(state)) == 4.5
    # Two white stones captured by Black and one black stone by White.
    state = state.replace(captures=jnp.array([2, 1], jnp.int16))
    assert float(white_bonus(state)) == -1.0  # Black placed 6 stones, White 7
    assert float(_score(state)) == 5.5
    # Area counting ignores prisoners.
    assert float(_score(state.replace(rules=gojax.get_rules("chinese")))) == 4.5


def test_dame_next_to_an_area_voids_it():
    # The empty point E3 touches both colours: dame. Both areas touch it, so
    # KataGo counts neither (it cannot tell an unfinished border from seki):
    # only the stones count, and the bonus cancels them.
    state = position(
        """
        . X . O .
        . X . O .
        . X . O .
        . X . O .
        . X . O .
        """,
        rules="japanese",
        komi=0.5,
    )
    life = np.asarray(independent_life_area(state.board, state.liberties))
    assert not life.any()
    assert float(_score(state)) == -0.5
    # Filling the dame (a black wall next to the white one) makes both count.
    filled = position(
        """
        . X X O .
        . X X O .
        . X X O .
        . X X O .
        . X X O .
        """,
        rules="japanese",
        komi=0.5,
    )
    assert float(_score(filled)) == 5.0 - 5.0 - 0.5
    # Batched as self-play scores its games.
    batch = jax.tree.map(lambda *x: jnp.stack(x), state, filled)
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(gojax.score))(batch)), [-0.5, -0.5])


def test_dead_stone_in_pass_alive_territory_costs_two_points():
    # Black's group has two eyes (A5 and the C5-E5 region holding a white
    # stone): pass-alive, so the white stone is dead: one point of territory
    # for Black plus one prisoner.
    board = """
        . X . O .
        X X X X X
        . . . . .
        . . . . .
        . . . . .
        """
    alive = position(board, rules="japanese", komi=0.0)
    tromp = position(board, rules="tromp-taylor", komi=0.0)
    life = np.asarray(independent_life_area(alive.board, alive.liberties))
    assert life[3] == B and life[2] == B and life[4] == B
    # Black's territory: A5, C5, D5 (under the stone), E5 and the 15 points
    # below, and one prisoner (KataGo: all 25 points Black's, less the bonus
    # of 6 black stones placed against 1 white).
    assert float(_score(alive)) == 19 + 1
    # Tromp-Taylor counts the white stone alive and C5/E5 as nobody's.
    assert float(_score(tromp)) == (6 + 1 + 15) - 1


def test_features_and_komi_under_territory_rules():
    from gojax.katago_features import katago_inputs

    state = new_game(9, rules="japanese", komi=6.5)
    state = gojax.play(state, gojax.gtp_to_action("E5", 9))  # Black placed one stone
    state = gojax.play(state, 81)  # White passes
    spatial, glob = (np.asarray(x) for x in jax.jit(katago_inputs)(state))
    # Black to move: self komi = -(6.5 + 1 stone) / 20.
    assert glob[5] == pytest.approx(-7.5 / 20)
    assert glob[9] == 1.0 and glob[10] == 1.0 and glob[11] == 0.0
    assert glob[18] == 0.0  # the komi wave is for area scoring
    # A pass that would end the game: not "friendly" under territory rules,
    # so the history stays and global 14 is set.
    assert glob[0] == 1.0 and glob[14] == 1.0
    assert spatial[4, 4, 10] == 1.0  # E5, two turns ago
    assert not spatial[..., 18:].any()  # no area planes before the encore
    chinese = state.replace(rules=gojax.get_rules("chinese"))
    _, glob_cn = (np.asarray(x) for x in jax.jit(katago_inputs)(chinese))
    assert glob_cn[5] == pytest.approx(-6.5 / 20) and glob_cn[14] == 0.0 and glob_cn[9] == 0.0


def test_area_planes_follow_the_rules_suicide_flag():
    """KataGo computes planes 18/19 with the rules' multi-stone suicide flag:
    with suicide legal the White stone on A1, not next to Black's group, keeps
    the left region from being an eye, and the group from being pass-alive."""
    from gojax.katago_features import katago_inputs

    board = """
        . X . .
        . X . .
        . X X X
        O . X .
        """
    spatial = {}
    for rules in ("chinese", "tromp-taylor"):
        state = position(board, rules=rules, to_play="B")
        spatial[rules] = np.asarray(jax.jit(katago_inputs)(state)[0])
    black, white = (spatial["chinese"][..., k] for k in (18, 19))
    assert black.all() and not white.any()  # everything Black's, the dead stone too
    black, white = (spatial["tromp-taylor"][..., k] for k in (18, 19))
    assert white[3, 0] == 1 and black[0, 0] == 0 and black[0, 2] == 1
    assert black.sum() == 11  # the left column and B1 are nobody's


def test_korean_is_japanese():
    assert gojax.get_rules("Korean") is gojax.get_rules("japanese")
    rules = gojax.get_rules("japanese")
    assert rules.ko == "simple" and not rules.multi_stone_suicide and rules.territory
    assert not rules.friendly_pass_ok
