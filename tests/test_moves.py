"""The "sensible" move set: no own-eye fills, pass only after a pass or when nothing is left."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from boards import fast_jit, position
from test_search import UNIFORM, adversarial_evaluator, searcher, stack, walk_edges

import gojax
from gojax._moves import own_eyes, sensible_moves
from gojax.search import SearchConfig

jit_sensible = fast_jit(sensible_moves)
jit_eyes = fast_jit(own_eyes)
jit_play = fast_jit(gojax.play)

# Black has eyes at A5 and A1 (corners), C5 (edge) and B3 (centre); D1 is White's.
EYES = """
    . X . X .
    X X X X .
    X . X . .
    X X X O .
    . X O . O
"""


def point(vertex: str, size: int = 5) -> int:
    return gojax.gtp_to_action(vertex, size)


def test_own_eyes_are_the_movers_single_point_eyes():
    black = position(EYES, to_play="B")
    eyes = np.flatnonzero(np.asarray(jit_eyes(black)))
    assert sorted(eyes) == sorted(point(v) for v in ("A5", "C5", "B3", "A1"))
    white = position(EYES, to_play="W")
    assert np.flatnonzero(np.asarray(jit_eyes(white))).tolist() == [point("D1")]


def test_sensible_moves_skip_own_eyes_but_not_the_opponents():
    black = position(EYES, to_play="B")
    legal = np.asarray(gojax.legal_moves(black))
    sensible = np.asarray(jit_sensible(black))
    for vertex in ("A5", "C5", "B3", "A1"):
        assert legal[point(vertex)] and not sensible[point(vertex)], vertex
    assert sensible[point("E5")] and sensible[point("D3")]
    white = position(EYES, to_play="W")
    # Black's eyes are suicide for White; White's own eye is not sensible for White.
    assert not np.asarray(jit_sensible(white))[point("B3")]
    assert not np.asarray(jit_sensible(white))[point("D1")]


def test_pass_only_after_a_pass_or_when_nothing_else_is_left():
    start = gojax.new_game(5)
    assert not bool(jit_sensible(start)[-1])
    after_pass = jit_play(start, start.num_actions - 1)
    sensible = np.asarray(jit_sensible(after_pass))
    assert sensible[-1] and sensible[:-1].sum() == 25
    # Black to move with only own eyes left: pass is the one sensible move.
    only_eyes = position(
        """
        . X X X X
        X X X X X
        X X . X X
        X X X X .
        X X X X X
        """,
        to_play="B",
    )
    sensible = np.asarray(jit_sensible(only_eyes))
    assert sensible.tolist() == [False] * 25 + [True]
    finished = jit_play(after_pass, after_pass.num_actions - 1)
    assert not np.asarray(jit_sensible(finished)).any()


def test_moves_must_be_a_known_set():
    with pytest.raises(ValueError, match="moves must be one of"):
        SearchConfig(moves="everything")


@pytest.mark.parametrize("kind", ["puct", "gumbel", "uct"])
def test_sensible_search_never_plays_an_excluded_move(kind):
    states = stack([position(EYES, to_play="B"), position(EYES, to_play="W")])
    config = SearchConfig(
        kind=kind, num_simulations=64, max_num_considered_actions=8, moves="sensible"
    )
    evaluator = UNIFORM if kind == "uct" else adversarial_evaluator
    out = searcher(evaluator, config)(states, jax.random.key(3))
    allowed = np.asarray(fast_jit(jax.vmap(jax.vmap(sensible_moves)))(out.tree.embeddings))
    edges = list(walk_edges(out.tree))
    assert len(edges) > 64
    for b, parent, action, _ in edges:
        assert allowed[b, parent, action], (b, parent, action)
    assert np.all(allowed[np.arange(2), 0, np.asarray(out.action)])
