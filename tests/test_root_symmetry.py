"""KataGo's root symmetry pruning (``gojax._root_symmetry``,
``SearchConfig.root_symmetry_pruning``): at a symmetric position one move of each set of
equivalent moves is searched, the others keep their prior, and analyses report them all."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, play_moves, position
from test_search import batch, searcher
from test_search_resume import deterministic_evaluator

import gojax
from gojax import gtp_to_action
from gojax._root_symmetry import duplicate_moves, root_symmetries, symmetric_moves
from gojax._symmetry import symmetric_point
from gojax.search import SearchConfig, reuse_subtree, search


def searched_vertices(state: gojax.GoState) -> list[str]:
    """The legal moves of ``state`` that pruning searches (not duplicates), pass left out."""
    legal = gojax.legal_moves(state)
    kept = np.asarray(legal & ~duplicate_moves(state, legal))[:-1]
    return [gojax.action_to_gtp(int(a), state.size) for a in np.flatnonzero(kept)]


def orbit(vertex: str, size: int) -> set[str]:
    row, col = divmod(gtp_to_action(vertex, size), size)
    return {
        gojax.action_to_gtp(r * size + c, size)
        for r, c in (symmetric_point(row, col, size, s) for s in range(8))
    }


def test_an_empty_board_searches_one_move_of_each_orbit_in_katagos_corner():
    """Empty 9x9: the 8 symmetries leave 15 orbits of points; Black's move of each is the
    first in KataGo's order (columns from the right, each from the top: the upper right),
    White's the first from the left, each from the bottom; 19x19 has 55."""
    empty = gojax.new_game(9)
    assert np.asarray(root_symmetries(empty, gojax.legal_moves(empty))).all()
    black = searched_vertices(empty)
    assert len(black) == 15 and "J9" in black and "E5" in black
    assert set().union(*(orbit(v, 9) for v in black)) == {
        gojax.action_to_gtp(a, 9) for a in range(81)
    }
    assert all(gtp_to_action(v, 9) % 9 >= 4 and gtp_to_action(v, 9) // 9 <= 4 for v in black)
    white = searched_vertices(play_moves(empty, "B E5"))
    assert len(white) == 14 and "A1" in white and "E5" not in white
    assert all(gtp_to_action(v, 9) % 9 <= 4 and gtp_to_action(v, 9) // 9 >= 4 for v in white)
    assert len(searched_vertices(gojax.new_game(19))) == 55
    legal = gojax.legal_moves(empty)
    assert not bool(duplicate_moves(empty, legal)[-1])  # pass is its own


def test_only_the_symmetries_of_the_stones_moves_and_no_ko_count():
    corner = position(
        """
        X . . . .
        . . . . .
        . . . . .
        . . . . .
        . . . . .
        """
    )
    legal = gojax.legal_moves(corner)
    # A stone on the diagonal: the identity and the transpose (symmetry 4).
    assert np.flatnonzero(np.asarray(root_symmetries(corner, legal))).tolist() == [0, 4]
    assert "B5" in searched_vertices(corner) and "A4" not in searched_vertices(corner)
    mirrored = position(
        """
        . . . . .
        . X . O .
        . . . . .
        . O . X .
        . . . . .
        """
    )
    # The 180-degree turn and both diagonals map each colour onto itself.
    symmetries = root_symmetries(mirrored, gojax.legal_moves(mirrored))
    assert np.flatnonzero(np.asarray(symmetries)).tolist() == [0, 3, 4, 7]
    # No symmetry with a ko ban, or with moves the symmetry does not keep legal.
    ko = corner.replace(ko=jnp.int16(gtp_to_action("C3", 5)))
    assert np.flatnonzero(np.asarray(root_symmetries(ko, gojax.legal_moves(ko)))).tolist() == [0]
    lopsided = legal.at[gtp_to_action("B5", 5)].set(False)
    assert np.flatnonzero(np.asarray(root_symmetries(corner, lopsided))).tolist() == [0]
    assert not np.any(np.asarray(duplicate_moves(corner, lopsided)))


def test_symmetric_moves_list_each_image_once_the_move_first():
    symmetries = np.ones(8, bool)
    moves = symmetric_moves(gtp_to_action("J9", 9), 9, symmetries)
    assert moves[0] == (0, gtp_to_action("J9", 9))
    assert sorted(gojax.action_to_gtp(a, 9) for _, a in moves) == ["A1", "A9", "J1", "J9"]
    assert symmetric_moves(gtp_to_action("E5", 9), 9, symmetries) == [(0, 40)]
    assert symmetric_moves(81, 9, symmetries) == [(0, 81)]  # pass


def test_a_pruned_search_visits_one_move_of_each_orbit_and_keeps_the_whole_prior():
    """Duplicates get no visit and stay out of the move chosen, but keep their prior (the
    root's prior is the unpruned one, as KataGo's); a pruned tree is continued, a tree
    that holds visits on duplicates is not."""
    states = batch(gojax.new_game(5, komi=0.5, max_moves=40), 2)
    pruned = SearchConfig(kind="katago", num_simulations=64, temperature_moves=0,
                          root_symmetry_pruning=True)  # fmt: skip
    plain = SearchConfig(kind="katago", num_simulations=64, temperature_moves=0)
    out = searcher(deterministic_evaluator, pruned)(states, jax.random.key(0))
    full = searcher(deterministic_evaluator, plain)(states, jax.random.key(0))
    legal = gojax.legal_moves(gojax.new_game(5))
    duplicates = np.asarray(duplicate_moves(gojax.new_game(5), legal))
    visits = np.asarray(out.visit_counts)
    assert np.all(visits[:, duplicates] == 0) and np.all(visits.sum(axis=1) == 64)
    assert np.any(np.asarray(full.visit_counts)[:, duplicates] > 0)  # premise
    assert (
        np.asarray(out.root_symmetries).all() and not np.asarray(full.root_symmetries)[:, 1:].any()
    )
    assert not duplicates[np.asarray(out.action)].any()
    root = np.asarray(out.tree.children_prior_logits[:, 0])
    np.testing.assert_allclose(root, np.asarray(full.tree.children_prior_logits[:, 0]), atol=1e-6)
    assert np.all(root[:, duplicates] > -1e9)  # in the prior, out of the selection
    # The same position searched on goes on from its pruned tree.
    same = searcher(deterministic_evaluator, pruned)(states, jax.random.key(1), tree=out.tree)
    assert np.all(np.asarray(same.simulations) == 0)  # its 65 root visits are the budget
    # After the centre point the position is still symmetric, and the kept subtree was
    # searched as a child, duplicates included: it starts again.
    center = jnp.full((2,), gtp_to_action("C3", 5), jnp.int32)
    kept = fast_jit(reuse_subtree)(out.tree, center)
    after = jax.vmap(gojax.play)(states, center)
    child_duplicates = np.asarray(
        jax.vmap(duplicate_moves)(after, jax.vmap(gojax.legal_moves)(after))
    )
    held = np.asarray(kept.children_visits[:, 0])[child_duplicates]
    assert held.sum() > 0  # premise: visits on moves the pruning keeps out
    again = searcher(deterministic_evaluator, pruned)(after, jax.random.key(1), tree=kept)
    assert np.all(np.asarray(again.simulations) == 64)


def test_an_avoided_move_stands_for_none_of_its_images():
    """As KataGo's: the position's symmetries hold whatever ``avoid`` keeps out, and an
    avoided move's images are searched in its place (one of them for the rest)."""
    state = gojax.new_game(5, komi=0.5, max_moves=40)
    legal = gojax.legal_moves(state)
    corner = gtp_to_action("E5", 5)  # Black's first corner in KataGo's order
    assert not bool(duplicate_moves(state, legal)[corner])  # premise: it is searched
    avoid = jnp.zeros((1, 2, state.num_actions), jnp.int32).at[0, 0, corner].set(1)
    config = SearchConfig(kind="katago", num_simulations=48, temperature_moves=0,
                          root_symmetry_pruning=True)  # fmt: skip
    run = fast_jit(functools.partial(search, deterministic_evaluator, config=config))
    out = run(batch(state, 1), jax.random.key(3), avoid=avoid)
    assert np.asarray(out.root_symmetries).all()  # still symmetric
    kept_out = np.asarray(out.tree.root_invalid_actions)[0] > 0
    corners = [gtp_to_action(v, 5) for v in ("A1", "A5", "E1")]
    assert kept_out[corner] and sum(not kept_out[c] for c in corners) == 1
    assert np.asarray(out.visit_counts)[0, corner] == 0 and int(out.visit_counts.sum()) == 48
    assert int((~kept_out).sum()) == 6 + 1  # 6 orbits of 25 points, and pass


@pytest.mark.parametrize("kind", ["puct", "gumbel", "uct"])
def test_every_search_kind_keeps_duplicates_out(kind):
    extra = {"max_num_considered_actions": 4} if kind == "gumbel" else {}
    config = SearchConfig(kind=kind, num_simulations=24, temperature_moves=0,
                          root_symmetry_pruning=True, **extra)  # fmt: skip
    state = gojax.new_game(5, komi=0.5, max_moves=40)
    out = searcher(deterministic_evaluator, config)(batch(state, 1), jax.random.key(2))
    duplicates = np.asarray(duplicate_moves(state, gojax.legal_moves(state)))
    assert np.all(np.asarray(out.visit_counts)[0, duplicates] == 0)
    assert int(np.asarray(out.visit_counts).sum()) == 24
