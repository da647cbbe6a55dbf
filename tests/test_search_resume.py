"""A search stopped early (``stop_at``) and continued (``resume``) is the search run at
once: what the analysis engine's reports during a search rest on."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit
from test_score_utility import _distribution
from test_search import stack

import gojax
from gojax.search import SearchConfig, search


def _logits(states: gojax.GoState) -> jax.Array:
    """``[B, A]`` uneven priors that depend on the position alone, not on a key."""
    board = states.board.astype(jnp.float32)
    seed = jnp.sum(board * jnp.arange(1, board.shape[1] + 1), axis=1)  # [B]
    actions = jnp.arange(states.num_actions, dtype=jnp.float32)
    return 2.0 * jnp.sin(1.7 * actions[None] + 0.37 * seed[:, None] + states.to_play[:, None])


def deterministic_evaluator(states: gojax.GoState, key: jax.Array):
    """Priors, values and score distributions from the position alone (five outputs)."""
    del key
    return (_logits(states), *_distribution(states))


def positions() -> gojax.GoState:
    """Three 5x5 positions a few moves into a game."""
    games = []
    for moves in ([12], [6, 18, 7], [0, 24, 12, 13]):
        state = gojax.new_game(5, komi=0.5, max_moves=40)
        for move in moves:
            state = gojax.play(state, move)
        games.append(state)
    return stack(games)


@functools.cache
def run(config: SearchConfig, resume: bool):
    def go(states, key, tree, stop_at):
        return search(
            deterministic_evaluator, states, key, config, tree=tree, stop_at=stop_at, resume=resume
        )

    return fast_jit(go)


CONFIGS = {
    # Root noise: a resumed root must keep the noise it started with, not draw more.
    "puct": SearchConfig(kind="puct", num_simulations=40, temperature_moves=0),
    # Weighs scores: the utility's centre must stay the start's.
    "katago": SearchConfig(kind="katago", num_simulations=40, temperature_moves=0),
    "gumbel": SearchConfig(kind="gumbel", num_simulations=40, max_num_considered_actions=8),
}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_a_search_in_parts_is_the_search_at_once(kind):
    config = CONFIGS[kind]
    states = positions()
    whole = run(config, False)(states, jax.random.key(0), None, None)
    # Each game stops at its own visits, then all go on to 20, then to the end; the later
    # calls get other keys, which a resumed search must not use for anything it decides.
    part = run(config, False)(states, jax.random.key(0), None, jnp.array([3, 9, 17]))
    np.testing.assert_array_equal(np.asarray(part.tree.node_visits[:, 0]), [3, 9, 17])
    np.testing.assert_array_equal(np.asarray(part.simulations), [2, 8, 16])
    part = run(config, True)(states, jax.random.key(1), part.tree, jnp.int32(20))
    assert np.all(np.asarray(part.tree.node_visits[:, 0]) == 20)
    part = run(config, True)(states, jax.random.key(2), part.tree, None)
    for name in ("node_visits", "children_visits", "children_index"):
        np.testing.assert_array_equal(
            np.asarray(getattr(part.tree, name)), np.asarray(getattr(whole.tree, name)), name
        )
    # The same sums, compiled into other programs: equal to float32 rounding.
    np.testing.assert_allclose(
        np.asarray(part.tree.node_values), np.asarray(whole.tree.node_values), atol=1e-6
    )
    np.testing.assert_array_equal(np.asarray(part.action), np.asarray(whole.action))
    np.testing.assert_array_equal(np.asarray(part.visit_counts), np.asarray(whole.visit_counts))
    np.testing.assert_allclose(np.asarray(part.root_score), np.asarray(whole.root_score), atol=1e-5)
    if kind == "katago":  # the score utilities did weigh in
        assert np.any(np.asarray(whole.tree.node_score_utilities) != 0)


def test_a_search_from_a_kept_tree_in_parts_is_the_search_at_once():
    """A search that starts from a kept subtree (tree reuse: GTP pondering after a move)
    centres its score utility on the kept root's mean; its later parts keep that centre."""
    from gojax.search import reuse_subtree

    config = CONFIGS["katago"]
    states = positions()
    first = run(config, False)(states, jax.random.key(0), None, None)
    after = jax.vmap(gojax.play)(states, first.action)
    kept = fast_jit(reuse_subtree)(first.tree, first.action)
    assert np.all(np.asarray(kept.node_visits[:, 0]) > 1)  # premise: real kept trees
    whole = run(config, False)(after, jax.random.key(3), kept, None)
    part = run(config, False)(after, jax.random.key(3), kept, jnp.int32(30))
    part = run(config, True)(after, jax.random.key(4), part.tree, None)
    np.testing.assert_array_equal(
        np.asarray(part.tree.node_visits), np.asarray(whole.tree.node_visits)
    )
    np.testing.assert_array_equal(np.asarray(part.visit_counts), np.asarray(whole.visit_counts))
    np.testing.assert_allclose(
        np.asarray(part.tree.extra_data.center), np.asarray(whole.tree.extra_data.center)
    )


def test_a_kept_root_shown_without_its_past_is_searched_on_with_its_new_prior():
    """``show_roots``: a kept subtree whose root is the position shown with no past move
    (KataGo's ignorePreRootHistory) takes that position and the prior given, keeps its
    statistics and is searched on; a game whose kept root is another position is left
    as it was, and its search starts fresh."""
    from gojax.katago_features import forget_history
    from gojax.search import _same_position, reuse_subtree, show_roots

    config = CONFIGS["katago"]
    states = positions()
    first = run(config, False)(states, jax.random.key(0), None, None)
    kept = fast_jit(reuse_subtree)(first.tree, first.action)
    after = jax.vmap(gojax.play)(states, first.action)
    # Game 2 is shown a position its kept root is not (another move).
    other = jnp.where(first.action[2] == 3, 4, 3)
    after = jax.tree.map(
        lambda a, b: a.at[2].set(b), after, gojax.play(jax.tree.map(lambda x: x[2], states), other)
    )
    shown = forget_history(after)
    assert not np.any(np.asarray(_same_position(kept, shown)))  # premise: the past differs
    prior = jnp.tile(jnp.linspace(-1.0, 0.0, states.num_actions)[None], (3, 1))
    tree = fast_jit(show_roots)(kept, shown, prior)
    np.testing.assert_array_equal(np.asarray(_same_position(tree, shown)), [True, True, False])
    np.testing.assert_array_equal(np.asarray(tree.node_visits), np.asarray(kept.node_visits))
    root_prior = np.asarray(tree.extra_data.root_prior)
    np.testing.assert_array_equal(root_prior[:2], np.asarray(prior)[:2])
    np.testing.assert_array_equal(root_prior[2], np.asarray(kept.extra_data.root_prior)[2])
    out = run(config, False)(shown, jax.random.key(5), tree, None)
    kept_visits = np.asarray(kept.node_visits[:, 0])
    np.testing.assert_array_equal(np.asarray(out.simulations)[:2], 41 - kept_visits[:2])
    assert int(out.simulations[2]) == 40  # fresh: the root's own visit and 40 simulations


def test_resume_needs_a_tree():
    with pytest.raises(ValueError, match="resume needs the tree"):
        search(
            deterministic_evaluator, positions(), jax.random.key(0), CONFIGS["puct"], resume=True
        )
