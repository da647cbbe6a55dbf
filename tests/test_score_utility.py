"""KataGo's score utility (``gojax._utility``) and how ``kind="katago"`` searches with it.

The utility's expectation is checked against an independent integration, its
centre and finished-game spread against KataGo's rules for them; in searched
trees every node's mean score utility and squared utility must be the mean of
what reached it (its own evaluation's utility, recomputed here from the
position, plus everything backed up through its children).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, position
from test_search import CAPTURE, CAPTURE_MOVE, batch, searcher
from test_search_scores import _formula

import gojax
from gojax import _utility
from gojax.search import (
    SearchConfig,
    _rescored,
    reuse_subtree,
    root_score_means,
    root_stats,
    subtree_score_distributions,
)


def _distribution(states: gojax.GoState):
    """Value, lead, score mean and deviation from the stones (mean differs from the lead,
    so that a test can tell which one the utility took)."""
    value, lead = _formula(states)
    mean = lead + 0.75
    stdev = 1.0 + 0.2 * states.move_number.astype(jnp.float32)
    return value, lead, mean, stdev


def distribution_evaluator(states: gojax.GoState, key: jax.Array):
    """Random priors, formula values, leads and score distributions (five outputs)."""
    logits = jax.random.normal(key, (states.to_play.shape[0], states.num_actions))
    return (logits, *_distribution(states))


def _integrated(mean, stdev, center, scale, sqrt_area):
    """``E[2/pi atan((X - c) / (k sqrt_area))]`` over a normal cut at 5 deviations, by a
    fine trapezoid rule (independent of the module's 101-point sum)."""
    if stdev == 0:
        return 2 / math.pi * math.atan((mean - center) / (scale * sqrt_area))
    z = np.linspace(-5.0, 5.0, 20001)
    weight = np.exp(-0.5 * z**2)
    value = 2 / np.pi * np.arctan((mean + stdev * z - center) / (scale * sqrt_area))
    return np.trapezoid(weight * value, z) / np.trapezoid(weight, z)


@pytest.mark.parametrize(
    "mean, stdev, center, scale, size",
    [(0.0, 0.0, 0.0, 2.0, 19), (7.5, 0.0, 0.0, 2.0, 9), (3.0, 12.0, -2.0, 0.75, 9),
     (-40.0, 25.0, 10.0, 0.75, 19), (1.0, 0.3, 0.0, 2.0, 5)],
)  # fmt: skip
def test_expected_score_value_is_the_normal_expectation(mean, stdev, center, scale, size):
    got = float(_utility.expected_score_value(mean, stdev, center, scale, float(size)))
    assert got == pytest.approx(_integrated(mean, stdev, center, scale, size), abs=2e-4)


def test_score_utility_is_odd_bounded_and_prefers_more_points():
    means = jnp.linspace(-60.0, 60.0, 41)
    stdev = jnp.full_like(means, 6.0)
    center = jnp.full_like(means, 4.0)
    utility = np.asarray(_utility.score_utility(means, stdev, center, 9))
    mirrored = np.asarray(_utility.score_utility(-means, stdev, -center, 9))
    np.testing.assert_allclose(utility, -mirrored, atol=1e-6)  # the opponent's view
    assert np.all(np.diff(utility) > 0)
    assert np.all(np.abs(utility) < 0.1 + 0.3)
    # The weights: only the static term without a dynamic one, KataGo's 0.1 on it.
    static = float(_utility.score_utility(10.0, 0.0, 0.0, 9, 0.1, 0.0))
    assert static == pytest.approx(0.1 * 2 / math.pi * math.atan(10.0 / 18.0), rel=1e-5)
    # Uncertainty flattens the value of a lead (atan is concave above the centre).
    sure, unsure = (float(_utility.score_utility(15.0, s, 0.0, 9)) for s in (0.0, 20.0))
    assert 0 < unsure < sure


def test_dynamic_center_and_finished_spread_follow_katago():
    # A fifth of the way toward 0, but at most 0.75 * sqrt(area) from the expected score.
    np.testing.assert_allclose(_utility.dynamic_center(jnp.array([10.0, -10.0]), 9), [8.0, -8.0])
    np.testing.assert_allclose(_utility.dynamic_center(jnp.array([100.0]), 9), [100.0 - 6.75])
    np.testing.assert_allclose(_utility.dynamic_center(jnp.array([30.0]), 19), [24.0])
    np.testing.assert_allclose(_utility.dynamic_center(jnp.array([100.0]), 19), [100.0 - 14.25])
    # A whole-number margin could have been a draw either way: half a point of spread.
    spread = _utility.final_score_stdev(jnp.array([3.0, 2.5, 0.0]))
    np.testing.assert_allclose(spread, [0.5, 0.0, 0.5])


def _evaluations(tree, game: int):
    """One game's tree in float64 NumPy, and each node's own evaluation recomputed from its
    position: value, score mean and deviation (a finished game's count and spread), the
    player whose view they take, and whether the game is over there."""
    t = jax.tree.map(lambda x: np.asarray(x[game], np.float64), tree)
    node_states = jax.tree.map(lambda x: jnp.asarray(x[game]), tree.embeddings)
    value, _, mean, stdev = (np.asarray(x, np.float64) for x in _distribution(node_states))
    parents = t.parents.astype(int)
    to_play = np.asarray(node_states.to_play, np.float64)
    # The player whose view a node's numbers take: the one who did not choose its move.
    player = np.where(parents >= 0, -to_play[np.maximum(parents, 0)], to_play)
    finished = np.asarray(node_states.terminated)
    mean = np.where(finished, t.node_scores, mean)
    stdev = np.where(finished, np.asarray(_utility.final_score_stdev(t.node_scores)), stdev)
    return t, value, mean, stdev, player, finished


def check_utility_identities(tree, game: int, center_black: float, size: int) -> int:
    """Every node's score utility (own and mean) and mean squared utility against its
    evaluation (recomputed from its position) and its children's. Returns nodes checked."""
    t, value, mean, stdev, player, finished = _evaluations(tree, game)
    own = np.asarray(_utility.score_utility(mean, stdev, center_black * player, size), np.float64)
    checked = 0
    for node in np.flatnonzero(t.node_visits > 0):
        np.testing.assert_allclose(t.raw_score_utilities[node], own[node], atol=2e-6)
        if finished[node]:
            np.testing.assert_allclose(t.node_score_utilities[node], own[node], atol=2e-6)
            continue
        n = t.node_visits[node]
        visited = t.children_index[node] >= 0
        kids = t.children_index[node][visited].astype(int)
        counts = t.children_visits[node][visited]
        rewards = t.children_rewards[node][visited]
        kid_done = t.children_discounts[node][visited] == 0.0
        utility_sum = own[node] + np.sum(counts * -t.node_score_utilities[kids])
        squares = np.where(
            kid_done, (rewards - t.node_score_utilities[kids]) ** 2, t.node_utility_squares[kids]
        )
        square_sum = (value[node] + own[node]) ** 2 + np.sum(counts * squares)
        np.testing.assert_allclose(t.node_score_utilities[node] * n, utility_sum, atol=1e-4)
        np.testing.assert_allclose(t.node_utility_squares[node] * n, square_sum, atol=1e-4)
        checked += 1
    return checked


def test_every_node_averages_the_score_utilities_of_its_visits():
    # Short games (6 plies) so that trees hold finished games, whose count is their score.
    states = batch(gojax.new_game(5, komi=0.5, max_moves=6), 2)
    states = states.replace(to_play=states.to_play.at[1].set(-1))  # White to move in game 1
    config = SearchConfig(kind="katago", num_simulations=64, temperature_moves=0)
    out = searcher(distribution_evaluator, config)(states, jax.random.key(1))
    tree = out.tree
    assert np.any(np.asarray(tree.children_discounts) == 0.0)  # premise: finished games
    # The centre: KataGo's, from the root's score mean, for the root's mover.
    _, _, root_mean, _ = _distribution(states)
    centers = np.asarray(_utility.dynamic_center(root_mean, 5)) * np.asarray(states.to_play)
    for game in range(2):
        assert check_utility_identities(tree, game, float(centers[game]), 5) > 10
    # The root's children's utility: value plus (negated) score utility.
    stats = root_stats(tree)
    kids = np.asarray(tree.children_index[:, 0])
    visited = kids >= 0
    su = np.take_along_axis(np.asarray(tree.node_score_utilities), np.maximum(kids, 0), 1)
    np.testing.assert_allclose(
        np.asarray(stats.utility)[visited], (np.asarray(stats.q) - su)[visited], atol=1e-6
    )


def _mean_score_mean(tree, game: int) -> float:
    """The root's mean scoreMean over its visits, by recursion from the root: each node's
    own evaluations plus its children's subtrees, negated once per ply."""
    t, _, mean, _, _, _ = _evaluations(tree, game)

    def total(node: int) -> float:
        kids = t.children_index[node][t.children_index[node] >= 0].astype(int)
        own = t.node_visits[node] - sum(t.node_visits[k] for k in kids)
        return own * mean[node] - sum(total(k) for k in kids)

    return total(0) / t.node_visits[0]


def _score_moments(t, mean, stdev, node: int) -> np.ndarray:
    """``[visits, sum of score means, sum of mean**2 + stdev**2]`` of the evaluations below
    ``node`` by recursion, for its own player (means negated once per ply)."""
    kids = t.children_index[node][t.children_index[node] >= 0].astype(int)
    own = t.node_visits[node] - sum(t.node_visits[k] for k in kids)
    below = sum((_score_moments(t, mean, stdev, k) for k in kids), np.zeros(3)) * [1, -1, 1]
    return own * np.array([1, mean[node], mean[node] ** 2 + stdev[node] ** 2]) + below


def test_score_distributions_below_each_move_are_recursive_means():
    """``subtree_score_distributions``: below the root and below each root move, the mean
    scoreMean of the evaluations (recomputed from the positions, finished games their
    count) and the spread ``sqrt(E[mean**2 + stdev**2] - E[mean]**2)``, KataGo's
    scoreSelfplay and scoreStdev, for the root's mover; and the search's utilities."""
    states = batch(gojax.new_game(5, komi=0.5, max_moves=6), 2)
    states = states.replace(to_play=states.to_play.at[1].set(-1))  # White to move in game 1
    config = SearchConfig(kind="katago", num_simulations=48, temperature_moves=0)
    out = searcher(distribution_evaluator, config)(states, jax.random.key(3))
    stats = root_stats(out.tree)
    np.testing.assert_allclose(out.utilities, stats.utility)
    root_su = np.asarray(out.tree.node_score_utilities[:, 0])
    np.testing.assert_allclose(out.root_utility, np.asarray(out.root_value) + root_su, atol=1e-6)
    assert np.all(np.abs(root_su) > 1e-4)  # premise: the score counts
    np.testing.assert_allclose(out.utility_radius, [1.4, 1.4], atol=1e-6)
    for game in range(2):
        t, _, mean, stdev, _, _ = _evaluations(out.tree, game)
        total = functools.partial(_score_moments, t, mean, stdev)
        visited = [int(a) for a in np.flatnonzero(t.children_visits[0] > 0)]
        unvisited = int(np.flatnonzero(t.children_visits[0] == 0)[0])
        means, spreads = subtree_score_distributions(out.tree, game, visited + [unvisited])
        expected = [total(0)] + [total(int(t.children_index[0, a])) * [1, -1, 1] for a in visited]
        for row, (n, first, second) in enumerate(expected):
            assert means[row] == pytest.approx(first / n, abs=1e-4)
            assert spreads[row] == pytest.approx(np.sqrt(second / n - (first / n) ** 2), abs=1e-3)
        assert np.isnan(means[-1]) and np.isnan(spreads[-1])  # a move never searched
        assert len(visited) > 2 and np.all(spreads[:-1] > 0)


def test_a_kept_tree_is_rescored_around_its_new_center():
    """A continued search moves the centre to the mean scoreMean of the kept root (KataGo's
    ``recentScoreCenter``) and recomputes every kept node's score utilities around it, as
    if the whole tree had been searched with that centre."""
    states = batch(gojax.new_game(5, komi=0.5, max_moves=8), 2)
    states = states.replace(to_play=states.to_play.at[1].set(-1))
    config = SearchConfig(kind="katago", num_simulations=64, temperature_moves=0)
    run = searcher(distribution_evaluator, config)
    first = run(states, jax.random.key(4))
    kept = fast_jit(reuse_subtree)(first.tree, first.action)
    children = fast_jit(jax.vmap(gojax.play))(states, first.action)
    _, _, old_mean, _ = _distribution(states)
    old = np.asarray(_utility.dynamic_center(old_mean, 5)) * np.asarray(states.to_play)
    np.testing.assert_allclose(root_score_means(kept), [_mean_score_mean(kept, g) for g in (0, 1)],
                               atol=1e-5)  # fmt: skip
    mover = np.asarray(children.to_play)
    new = np.asarray(_utility.dynamic_center(root_score_means(kept), 5)) * mover
    assert np.all(np.abs(new - old) > 0.05)  # premise: the centre moved
    assert np.all(np.asarray(kept.node_visits[:, 0]) > 8)  # premise: a tree was kept
    second = run(children, jax.random.key(5), tree=kept)
    for game in range(2):
        assert check_utility_identities(second.tree, game, float(new[game]), 5) > 10


def test_rescoring_with_the_search_center_changes_nothing():
    """Recomputing a searched tree's score utilities around the centre it was searched with
    gives back what the backups averaged, finished games and their rewards included."""
    states = batch(gojax.new_game(5, komi=0.5, max_moves=6), 2)
    states = states.replace(to_play=states.to_play.at[1].set(-1))
    config = SearchConfig(kind="katago", num_simulations=64, temperature_moves=0)
    tree = searcher(distribution_evaluator, config)(states, jax.random.key(6)).tree
    _, _, root_mean, _ = _distribution(states)
    center = _utility.dynamic_center(root_mean, 5) * states.to_play

    def utility(mean, stdev, player):
        return _utility.score_utility(mean, stdev, center[:, None] * player, 5)

    again = fast_jit(_rescored, static_argnums=1)(tree, utility)
    for name in ("raw_score_utilities", "node_score_utilities", "node_utility_squares"):
        np.testing.assert_allclose(getattr(again, name), getattr(tree, name), atol=2e-6)
    np.testing.assert_allclose(root_score_means(tree), [_mean_score_mean(tree, g) for g in (0, 1)],
                               atol=1e-5)  # fmt: skip


def test_without_weights_the_search_ignores_scores():
    states = batch(gojax.new_game(5, komi=0.5, max_moves=6), 2)
    config = SearchConfig(
        kind="katago", num_simulations=32, static_score_utility=0, dynamic_score_utility=0
    )
    tree = searcher(distribution_evaluator, config)(states, jax.random.key(2)).tree
    assert np.all(np.asarray(tree.node_score_utilities) == 0.0)
    np.testing.assert_allclose(tree.node_utility_squares[:, 0] >= 0, True)
    with pytest.raises(ValueError, match="static_score_utility"):
        SearchConfig(kind="katago", static_score_utility=-0.1)


def _lead_only(states: gojax.GoState, key: jax.Array):
    """No opinion on who wins (value 0) nor on moves (uniform prior); the score is the
    mover's stone lead, with a spread of two points."""
    legal = jax.vmap(gojax.legal_moves)(states)
    logits = jnp.where(legal, 0.0, -1e9)
    board = states.board.astype(jnp.float32)
    lead = jnp.sum(board, axis=-1) * states.to_play.astype(jnp.float32)
    zeros = jnp.zeros_like(lead)
    return logits, zeros, lead, lead, zeros + 2.0


@pytest.mark.parametrize("weighs", [True, False])
def test_score_utility_prefers_the_bigger_win(weighs):
    """Every move ends the game (a move cap of one ply) and wins it for Black: on values
    alone the four moves are equal and share the visits; the score utility prefers the
    capture of three stones, which wins by the most."""
    state = position(**dict(CAPTURE, max_moves=1, komi=0.5))
    factors = {} if weighs else dict(static_score_utility=0.0, dynamic_score_utility=0.0)
    config = SearchConfig(
        kind="katago", num_simulations=128, dirichlet_fraction=0.0, temperature_moves=0, **factors
    )
    out = searcher(_lead_only, config)(batch(state, 4), jax.random.key(3))
    visits = np.asarray(out.visit_counts)
    assert np.count_nonzero(visits[0]) == 4  # C5, the two eyes, pass
    np.testing.assert_allclose(np.asarray(out.q_values)[visits > 0], 1.0)  # all win
    share = visits / visits.sum(axis=1, keepdims=True)
    if weighs:
        np.testing.assert_array_equal(out.action, CAPTURE_MOVE)
        assert np.all(share[:, CAPTURE_MOVE] > 0.5)
        utility = np.where(visits > 0, np.asarray(root_stats(out.tree).utility), -np.inf)
        np.testing.assert_array_equal(np.argmax(utility, axis=1), CAPTURE_MOVE)
    else:
        assert np.all(share < 0.3)
        assert len(set(np.asarray(out.action).tolist())) > 1


def test_katago_evaluator_gives_the_distribution_the_utility_takes():
    """On the reference net, the root's own score utility is KataGo's of the net's
    scoreMean and deviation around the centre drawn from that same mean."""
    from reference import reference_path

    from gojax.katago_model import load_model
    from gojax.search import katago_evaluator, search

    model = load_model(reference_path("katago", "g170-b6c96-s175395328-d26788732.bin.gz"))
    evaluator = katago_evaluator(model, symmetry=0)
    state = gojax.new_game(9, komi=7.0)
    states = batch(state, 1)
    config = SearchConfig(kind="katago", num_simulations=8, dirichlet_fraction=0.0)
    out = fast_jit(lambda s, k: search(evaluator, s, k, config))(states, jax.random.key(0))
    _, _, lead, mean, stdev = fast_jit(evaluator)(states, jax.random.key(0))
    center = _utility.dynamic_center(mean, 9)
    expected = _utility.score_utility(mean, stdev, center, 9)
    np.testing.assert_allclose(out.tree.raw_score_utilities[:, 0], expected, atol=1e-6)
    # Both terms take the sign of the mean: the static one is centred on 0, the dynamic
    # one on 0.8 times the mean.
    assert abs(float(mean[0])) > 0.1
    assert np.sign(float(out.tree.raw_score_utilities[0, 0])) == np.sign(float(mean[0]))
    assert float(lead[0]) != pytest.approx(float(mean[0]), abs=1e-3)
