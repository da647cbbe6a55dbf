"""What the search backs up besides values: mean scores and squared values per node.

Every node's statistics must be the mean over its visits of what reached it:
its own first evaluation plus everything backed up through each child. The
evaluator here scores a position by a formula of the position itself, so the
tests can recompute each node's first evaluation from the position the tree
stores and check the identity on every node of real trees (with finished
games inside, whose score is the rules' count).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, jit_play, new_game, position
from reference import reference_path
from test_search import batch, searcher

import gojax
from gojax.search import (
    SearchConfig,
    katago_evaluator,
    reuse_subtree,
    root_stats,
    tree_ownership,
    uniform_evaluator,
)


def _formula(states: gojax.GoState):
    """Value and score of positions, for the player to move, from the stones alone."""
    board = states.board.astype(jnp.float32)  # [B, P], +1 black, -1 white
    mover = states.to_play.astype(jnp.float32)
    stones = jnp.sum(board, axis=-1) * mover  # the mover's stone lead
    corner = board[:, 0] * mover
    value = jnp.tanh(0.3 * stones + 0.2 * corner)
    score = 1.5 * stones - 0.25 + corner
    return value, score


def scoring_evaluator(states: gojax.GoState, key: jax.Array):
    """Random priors (so that trees are uneven), formula values and scores."""
    logits = jax.random.normal(key, (states.to_play.shape[0], states.num_actions))
    value, score = _formula(states)
    return logits, value, score


def _nothing(states: gojax.GoState):
    """The uniform evaluator's value and score: none."""
    zeros = jnp.zeros(states.to_play.shape, jnp.float32)
    return zeros, zeros


def check_backup_identities(tree, game: int, formula=_formula) -> int:
    """Every node's mean score and squared value against its first evaluation (``formula``)
    and its children's statistics. Returns the number of nodes checked."""
    t = jax.tree.map(lambda x: np.asarray(x[game]), tree)
    node_states = jax.tree.map(lambda x: jnp.asarray(x), t.embeddings)
    raw_value, raw_score = (np.asarray(x) for x in formula(node_states))
    checked = 0
    for node in np.flatnonzero(t.node_visits > 0):
        n = t.node_visits[node]
        if t.embeddings.terminated[node]:
            # Every visit of a finished game is the same fixed result.
            assert t.node_utility_squares[node] == 0.0 and t.node_values[node] == 0.0
            continue
        children = t.children_index[node]
        visited = children >= 0
        counts = t.children_visits[node][visited]
        kids = children[visited]
        rewards = t.children_rewards[node][visited]
        finished = t.children_discounts[node][visited] == 0.0
        score_sum = raw_score[node] + np.sum(counts * -t.node_scores[kids])
        squares = np.where(finished, rewards**2, t.node_utility_squares[kids])
        square_sum = raw_value[node] ** 2 + np.sum(counts * squares)
        assert n == 1 + counts.sum()
        np.testing.assert_allclose(t.node_scores[node] * n, score_sum, rtol=1e-4, atol=1e-3)
        squares_mean = t.node_utility_squares[node]
        np.testing.assert_allclose(squares_mean * n, square_sum, rtol=1e-4, atol=1e-4)
        checked += 1
    return checked


@pytest.mark.parametrize("kind", ["puct", "gumbel", "uct"])
def test_every_node_averages_the_scores_and_squares_of_its_visits(kind):
    # Short games (a move cap of 6 plies) so that trees hold finished games.
    states = batch(new_game(5, komi=0.5, max_moves=6), 3)
    config = SearchConfig(kind=kind, num_simulations=48, temperature_moves=0)
    out = searcher(scoring_evaluator, config)(states, jax.random.key(1))
    assert np.any(np.asarray(out.tree.children_discounts) == 0.0)  # premise: finished games
    for game in range(3):
        assert check_backup_identities(out.tree, game) > 5


def test_finished_child_scores_the_rules_count():
    """After the opponent's pass, passing ends the game: the pass child's score is the
    mover's margin by the rules (board count and komi), whatever the evaluator says."""
    state = position(
        """
        X X O . .
        X X O . .
        X X O . .
        X X O . .
        X X O . .
        """,
        to_play="W",
        komi=2.5,
    )
    pass_move = state.num_actions - 1
    state = jit_play(state, pass_move)  # White passes: Black to move, one pass played
    assert int(state.passes) == 1 and int(state.to_play) == 1
    out = searcher(scoring_evaluator, SearchConfig(num_simulations=64, temperature_moves=0))(
        batch(state, 2), jax.random.key(0)
    )
    stats = root_stats(out.tree)
    child = jit_play(state, pass_move)
    assert bool(child.terminated)
    margin = float(gojax.score(child))  # Black's margin; Black is to move at the root
    assert int(out.visit_counts[0, pass_move]) > 0
    np.testing.assert_allclose(out.score_values[:, pass_move], margin, atol=1e-5)
    np.testing.assert_allclose(stats.score[:, pass_move], margin, atol=1e-5)
    assert float(out.q_stdev[0, pass_move]) == 0.0  # one fixed result
    # Visited children's spread is the spread of their backed-up values.
    visited = np.asarray(out.visit_counts[0]) > 1
    assert np.all(np.asarray(out.q_stdev[0])[visited] >= 0.0)
    assert np.any(np.asarray(out.q_stdev[0])[visited] > 0.0)


def test_root_score_is_the_visit_weighted_mean():
    states = batch(new_game(5, komi=0.5), 2)
    out = searcher(scoring_evaluator, SearchConfig(num_simulations=32, temperature_moves=0))(
        states, jax.random.key(2)
    )
    _, raw_score = _formula(states)
    visits = np.asarray(out.visit_counts, np.float64)
    expected = (np.asarray(raw_score) + np.sum(visits * np.asarray(out.score_values), -1)) / (
        1 + visits.sum(-1)
    )
    # The root's score is the mover's; each child's is already turned to the mover's view.
    np.testing.assert_allclose(out.root_score, expected, rtol=1e-5, atol=1e-4)


def test_reused_subtree_keeps_scores():
    states = batch(new_game(5, komi=0.5), 2)
    config = SearchConfig(num_simulations=40, temperature_moves=0)
    out = searcher(scoring_evaluator, config)(states, jax.random.key(3))
    kept = fast_jit(reuse_subtree)(out.tree, out.action)
    child = np.asarray(out.tree.children_index)[np.arange(2), 0, np.asarray(out.action)]
    np.testing.assert_array_equal(
        kept.node_scores[:, 0], np.asarray(out.tree.node_scores)[np.arange(2), child]
    )
    np.testing.assert_array_equal(
        kept.node_utility_squares[:, 0],
        np.asarray(out.tree.node_utility_squares)[np.arange(2), child],
    )
    for game in range(2):
        check_backup_identities(kept, game)


def test_evaluators_without_scores_give_zero_scores():
    """Without an evaluator's score only finished games carry one (the rules' count)."""
    states = batch(new_game(5, komi=0.5, max_moves=2), 2)
    out = searcher(uniform_evaluator(), SearchConfig(num_simulations=60))(states, jax.random.key(4))
    finished = np.asarray(out.tree.embeddings.terminated) & (np.asarray(out.tree.node_visits) > 0)
    assert np.any(finished)  # premise
    assert np.any(np.asarray(out.tree.node_scores)[finished] != 0.0)
    # Reported, a mean of zeros and a few final counts would mean nothing: zeros.
    assert not np.any(np.asarray(out.root_score)) and not np.any(np.asarray(out.score_values))
    for game in range(2):
        assert check_backup_identities(out.tree, game, formula=_nothing) > 3


def test_katago_evaluator_scores_are_the_leads_of_the_player_to_move():
    from gojax.evaluate import evaluate
    from gojax.katago_model import load_model

    model = load_model(reference_path("katago", "g170-b6c96-s175395328-d26788732.bin.gz"))
    net = model.module()
    state = jit_play(new_game(9, komi=7.0), 40)  # White to move after Black's tengen
    states = jax.tree.map(lambda *xs: jnp.stack(xs), new_game(9, komi=7.0), state)
    evaluator = katago_evaluator(model, symmetry=0)
    _, value, score, mean, stdev = fast_jit(evaluator)(states, jax.random.key(0))
    out = fast_jit(
        lambda s: evaluate(net, model.variables, s, version=model.output_spec, symmetry=0)
    )(states)
    mover_is_white = np.asarray(states.to_play) == -1
    lead = np.where(mover_is_white, 1.0, -1.0) * np.asarray(out["white_lead"])
    np.testing.assert_allclose(score, lead, atol=1e-5)
    assert mover_is_white.tolist() == [False, True]
    np.testing.assert_allclose(value, out["value"], atol=1e-6)
    # The score distribution KataGo's utility takes: scoreMean and the deviation left by
    # scoreMeanSq, for the mover.
    white_mean = np.asarray(out["white_score_selfplay"], np.float64)
    np.testing.assert_allclose(mean, np.where(mover_is_white, 1.0, -1.0) * white_mean, atol=1e-5)
    variance = np.asarray(out["white_score_selfplay_sq"], np.float64) - white_mean**2
    np.testing.assert_allclose(stdev, np.sqrt(variance), rtol=1e-4)
    assert np.all(np.asarray(stdev) > 1.0)  # a real spread in the opening


def owning_evaluator(states: gojax.GoState, key: jax.Array):
    """``scoring_evaluator`` with a score distribution and, as ownership, the stones
    themselves (Black's view), so that each node's ownership is known from its position."""
    logits, value, score = scoring_evaluator(states, key)
    spread = jnp.ones_like(score)
    return logits, value, score, score, spread, states.board.astype(jnp.float32)


def _expected_tree_ownership(tree, game: int) -> np.ndarray:
    """The mean, over the visits of game ``game``'s tree, of the board of the node each
    visit ended at (its own evaluation; a finished game's for each of its visits)."""
    t = jax.tree.map(lambda x: np.asarray(x[game]), tree)
    own = t.node_visits - t.children_visits.sum(-1)
    assert own.sum() == t.node_visits[0] and np.all(own >= 0)
    return (own[:, None] * t.embeddings.board).sum(0) / own.sum()


def test_root_ownership_is_the_mean_over_the_tree_as_katago_averages_it():
    # Short games, so that finished games (visited more than once) are in the trees.
    states = batch(new_game(5, komi=0.5, max_moves=2), 2)
    config = SearchConfig(num_simulations=40, temperature_moves=0)
    out = searcher(owning_evaluator, config)(states, jax.random.key(5))
    assert out.ownership.shape == (2, 25)
    finished = np.asarray(out.tree.embeddings.terminated) & (np.asarray(out.tree.node_visits) > 1)
    assert np.any(finished)  # premise: own visits above one
    for game in range(2):
        expected = _expected_tree_ownership(out.tree, game)
        np.testing.assert_allclose(out.ownership[game], expected, atol=1e-6)
        t = jax.tree.map(lambda x, g=game: np.asarray(x[g]), out.tree)
        own = t.node_visits - t.children_visits.sum(-1)
        square = (own[:, None] * t.embeddings.board**2).sum(0) / own.sum()
        np.testing.assert_allclose(
            out.ownership_stdev[game], np.sqrt(np.maximum(square - expected**2, 0)), atol=1e-5
        )
    np.testing.assert_array_equal(out.tree.raw_ownership, out.tree.embeddings.board)
    # Tracking changes nothing else: the same search without ownership.
    plain = searcher(lambda s, k: owning_evaluator(s, k)[:5], config)(states, jax.random.key(5))
    np.testing.assert_array_equal(plain.visit_counts, out.visit_counts)
    assert plain.ownership.shape == (2, 0) and plain.tree.raw_ownership.shape[-1] == 0
    # A kept subtree keeps its nodes' ownership; the next search's mean covers old and new.
    kept = fast_jit(reuse_subtree)(out.tree, out.action)
    np.testing.assert_array_equal(kept.raw_ownership, kept.embeddings.board)
    children = jax.vmap(gojax.play)(states, out.action)
    again = searcher(owning_evaluator, config)(children, jax.random.key(6), tree=kept)
    assert np.all(np.asarray(again.simulations) < 40)  # premise: the tree was continued
    for game in range(2):
        expected = _expected_tree_ownership(again.tree, game)
        np.testing.assert_allclose(again.ownership[game], expected, atol=1e-6)
        np.testing.assert_allclose(tree_ownership(again.tree)[game], expected, atol=1e-6)


def test_lower_confidence_bounds_follow_katago():
    from gojax.search import lower_confidence_bounds

    q = np.array([0.2, 0.2, 0.2, -0.4])
    visits = np.array([1, 2, 400, 0])
    stdev = np.array([0.0, 0.0, 0.3, 0.0])
    bounds = lower_confidence_bounds(q, visits, stdev)
    # One visit: the prior alone, variance 1/2 over 2 effective samples: 5 * 0.5 below.
    assert bounds[0] == pytest.approx(0.2 - 2.5)
    # Many visits: the prior fades, 5 standard errors of the mean below.
    assert bounds[2] == pytest.approx(0.2 - 5 * 0.3 / 20, rel=1e-3)
    assert bounds[0] < bounds[1] < bounds[2]
    assert bounds[3] == pytest.approx(-0.4 - 10)  # no visits: KataGo's widest bound
    as_jax = lower_confidence_bounds(jnp.asarray(q), jnp.asarray(visits), jnp.asarray(stdev))
    np.testing.assert_allclose(as_jax, bounds, rtol=1e-6)


def test_lcb_choice_prefers_a_surer_move_with_enough_visits():
    from gojax.search import _lcb_choice

    visits = jnp.array([[10, 4, 1, 0]])
    q = jnp.array([[0.0, 0.5, 0.9, 0.0]])
    stdev = jnp.array([[0.1, 0.05, 0.0, 0.0]])
    invalid = jnp.array([[False, False, False, True]])
    # Move 2 has the best value but 1 visit, under 15% of 10: not eligible.
    assert int(_lcb_choice(visits, q, stdev, invalid, 0.15)[0]) == 1
    # Move 1's 4 visits are under half of 10: the most visited move stays.
    assert int(_lcb_choice(visits, q, stdev, invalid, 0.5)[0]) == 0


def test_lcb_choice_floors_the_spread_of_few_agreeing_visits():
    from gojax.search import _lcb_choice

    # Move 1's 3 visits agreed (no spread): as seen, its bound is the surest.
    visits = jnp.array([[12, 3]])
    q = jnp.array([[0.30, 0.45]])
    stdev = jnp.array([[0.30, 0.0]])
    invalid = jnp.zeros((1, 2), bool)
    assert int(_lcb_choice(visits, q, stdev, invalid, 0.15, stdevs=3.0)[0]) == 1
    # A spread of at least 0.4: 3 visits' bound (about -0.29) falls under 12 visits'
    # (about -0.05).
    assert int(_lcb_choice(visits, q, stdev, invalid, 0.15, 3.0, 3.0, 0.4)[0]) == 0
    # Fewer standard errors: move 1's lead outweighs its doubt again.
    assert int(_lcb_choice(visits, q, stdev, invalid, 0.15, 3.0, 0.5, 0.4)[0]) == 1


def test_lcb_settings_are_checked():
    with pytest.raises(ValueError, match="lcb_stdev_floor"):
        SearchConfig(lcb_stdev_floor=-0.1)
    with pytest.raises(ValueError, match="lcb_stdevs"):
        SearchConfig(lcb_stdevs=-1.0)


def test_search_plays_the_lcb_move():
    # PUCT mostly visits its best-valued move most: the LCB move differs in 2 of these 16
    # searches (random priors, one key).
    states = batch(new_game(5, komi=0.5), 16)
    config = SearchConfig(num_simulations=96, temperature_moves=0, lcb_selection=True)
    out = searcher(scoring_evaluator, config)(states, jax.random.key(1))
    plain = searcher(scoring_evaluator, SearchConfig(num_simulations=96, temperature_moves=0))(
        states, jax.random.key(1)
    )
    np.testing.assert_array_equal(out.visit_counts, plain.visit_counts)  # same search
    from gojax.search import lower_confidence_bounds

    visits = np.asarray(out.visit_counts)
    bounds = lower_confidence_bounds(
        np.asarray(out.q_values, np.float64), visits, np.asarray(out.q_stdev, np.float64)
    )
    eligible = visits >= 0.15 * visits.max(axis=1, keepdims=True)
    expected = np.argmax(np.where(eligible & (visits > 0), bounds, -np.inf), axis=1)
    np.testing.assert_array_equal(out.action, expected)
    assert np.any(np.asarray(out.action) != np.asarray(plain.action))  # premise: it matters
    # The play settings (3 standard errors, a spread of at least 0.4): the same search,
    # the move of those bounds.
    floored = dataclasses.replace(config, lcb_stdevs=3.0, lcb_stdev_floor=0.4)
    out = searcher(scoring_evaluator, floored)(states, jax.random.key(1))
    np.testing.assert_array_equal(out.visit_counts, plain.visit_counts)
    spread = np.maximum(np.asarray(out.q_stdev, np.float64), 0.4)
    bounds = lower_confidence_bounds(np.asarray(out.q_values, np.float64), visits, spread, 3.0)
    expected = np.argmax(np.where(eligible & (visits > 0), bounds, -np.inf), axis=1)
    np.testing.assert_array_equal(out.action, expected)
