"""KataGo's PUCT (``SearchConfig(kind="katago")``): its arithmetic, checked against a NumPy
transcription of KataGo's formulas on real trees, and known best moves."""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
import pytest
from boards import fast_jit, position
from test_score_utility import distribution_evaluator
from test_search import (
    CAPTURE,
    CAPTURE_MOVE,
    ENDING,
    ENDING_MOVE,
    SAVE,
    SAVE_MOVE,
    batch,
    legal_in_tree,
    searcher,
    walk_edges,
)
from test_search_scores import scoring_evaluator

import gojax
from gojax import _selection
from gojax.search import SearchConfig, search, uniform_evaluator

UNIFORM = uniform_evaluator()


def katago_scores(
    tree,
    game: int,
    node: int,
    root_reduction: float,
    *,
    reduction: float = 0.2,
    stdev_scale: float = 0.85,
    cpuct: tuple[float, float, float] = (1.0, 0.45, 500.0),
    policy_power: float = 1.0,
) -> np.ndarray:
    """KataGo's selection values of ``node``'s children, transcribed from its C++ with NumPy
    (float64), on utilities (value plus score utility); illegal children -inf. The keywords
    are KataGo's fpuReductionMax, cpuctUtilityStdevScale and cpuctExploration(Log, Base),
    and the power its wideRootNoise raises the prior to in the exploration term."""
    t = jax.tree.map(lambda x: np.asarray(x[game], np.float64), tree)
    logits = t.children_prior_logits[node]
    legal = logits > _selection.ILLEGAL_THRESHOLD
    prior = np.where(legal, np.exp(logits - logits[legal].max()), 0.0)
    prior /= prior.sum()
    n = t.children_visits[node]
    q = t.children_rewards[node] + t.children_discounts[node] * t.children_values[node]
    kids = t.children_index[node].astype(int)
    q = q - np.where(kids >= 0, t.node_score_utilities[np.maximum(kids, 0)], 0.0)
    total = n.sum()
    # getFpuValueForChildrenAssumeVisited
    visits = t.node_visits[node]
    utility = t.node_values[node] + t.node_score_utilities[node]
    raw = t.raw_values[node] + t.raw_score_utilities[node]
    if visits <= 1:
        stdev = 0.4
    else:
        sq = max(t.node_utility_squares[node], utility**2)
        pooled = ((utility**2 + 0.16) * 2.0 + sq * visits) / (2.0 + visits - 1.0)
        stdev = math.sqrt(max(0.0, pooled - utility**2))
    factor = 1.0 + stdev_scale * (stdev / 0.4 - 1.0)
    mass = prior[n > 0].sum()
    weight = min(1.0, mass**2.0)
    parent = weight * utility + (1 - weight) * raw
    fpu = parent - (root_reduction if node == 0 else reduction) * math.sqrt(mass)
    # getExploreScaling, getExploreSelectionValue
    c, c_log, c_base = cpuct
    scaling = (c + c_log * math.log((total + c_base) / c_base)) * math.sqrt(total + 0.01) * factor
    value = np.where(n > 0, q, fpu)
    return np.where(legal, value + scaling * prior**policy_power / (1.0 + n), -np.inf)


@pytest.mark.parametrize("evaluator", [scoring_evaluator, distribution_evaluator])
def test_selection_matches_katago_formulas_at_every_node(evaluator):
    states = batch(gojax.new_game(5, komi=0.5, max_moves=8), 2)
    config = SearchConfig(kind="katago", num_simulations=64, dirichlet_fraction=0.0)
    tree = searcher(evaluator, config)(states, jax.random.key(0)).tree
    if evaluator is distribution_evaluator:  # premise: the utilities are in play
        assert np.abs(np.asarray(tree.node_score_utilities)).max() > 0.05
    select = fast_jit(
        lambda t, b, node: _selection.katago_puct(
            jax.random.key(1), jax.tree.map(lambda x: x[b], t), node, node, root_fpu_reduction=0.1
        )
    )
    checked = 0
    for b in range(2):
        visited = np.flatnonzero(np.asarray(tree.node_visits[b]) > 1)
        for node in visited:
            if bool(tree.embeddings.terminated[b, node]):
                continue
            scores = katago_scores(tree, b, int(node), 0.1)
            best = np.flatnonzero(scores >= scores.max() - 1e-5)
            assert int(select(tree, b, int(node))) in best, (b, node)
            checked += 1
    assert checked > 10


# KataGo's parameters away from their defaults: (SearchConfig fields, katago_scores keywords).
OTHER_CONSTANTS = [
    (
        dict(fpu_reduction=0.0, root_fpu_reduction=0.5, cpuct_utility_stdev_scale=0.0,
             cpuct_exploration=1.5, cpuct_exploration_log=0.0),
        dict(root_reduction=0.5, reduction=0.0, stdev_scale=0.0, cpuct=(1.5, 0.0, 500.0)),
    ),
    (
        dict(fpu_reduction=1.0, root_fpu_reduction=0.0, cpuct_utility_stdev_scale=1.0,
             cpuct_exploration=0.5, cpuct_exploration_log=2.0, cpuct_exploration_base=50.0),
        dict(root_reduction=0.0, reduction=1.0, stdev_scale=1.0, cpuct=(0.5, 2.0, 50.0)),
    ),
]  # fmt: skip


@pytest.mark.parametrize("fields, constants", OTHER_CONSTANTS)
def test_the_configs_constants_reach_every_selection(fields, constants):
    """A tree grown with other constants is consistent with KataGo's formulas under
    those constants: the child the search's own rule picks is the best by them."""
    states = batch(gojax.new_game(5, komi=0.5, max_moves=8), 2)
    config = SearchConfig(kind="katago", num_simulations=48, dirichlet_fraction=0.0, **fields)
    tree = searcher(distribution_evaluator, config)(states, jax.random.key(0)).tree
    select = fast_jit(
        lambda t, b, node: _selection.katago_puct(
            jax.random.key(1),
            jax.tree.map(lambda x: x[b], t),
            node,
            node,
            **config.katago_puct_constants,
        )
    )
    checked = 0
    for b in range(2):
        for node in np.flatnonzero(np.asarray(tree.node_visits[b]) > 1):
            if bool(tree.embeddings.terminated[b, node]):
                continue
            scores = katago_scores(tree, b, int(node), **constants)
            best = np.flatnonzero(scores >= scores.max() - 1e-5)
            assert int(select(tree, b, int(node))) in best, (b, node)
            checked += 1
    assert checked > 5


def root_moves_searched(**fields) -> int:
    """Root moves with a visit after a 48-simulation KataGo search of an empty 5x5 board
    with a uniform prior and no score (every move looks alike)."""
    states = batch(gojax.new_game(5, komi=0.5), 1)
    config = SearchConfig(kind="katago", num_simulations=48, dirichlet_fraction=0.0, **fields)
    out = searcher(scoring_evaluator, config)(states, jax.random.key(3))
    return int(np.sum(np.asarray(out.tree.children_visits[0, 0]) > 0))


def test_first_play_urgency_at_the_root_decides_how_wide_the_search_goes():
    # With no reduction an unvisited move is as good as its parent: the visits spread;
    # a large one keeps them on the few moves tried first.
    wide, default, narrow = (root_moves_searched(root_fpu_reduction=r) for r in (0.0, None, 2.0))
    assert wide > default > narrow, (wide, default, narrow)


def test_wide_root_noise_picks_root_moves_as_katagos_draws_do():
    """Over many keys, the root moves the rule picks under wideRootNoise are distributed
    as KataGo's: its selection values with the prior flattened, plus ``w * |g|`` on a
    fair coin per move, drawn by NumPy."""
    states = batch(gojax.new_game(5, komi=0.5, max_moves=8), 1)
    config = SearchConfig(kind="katago", num_simulations=32, dirichlet_fraction=0.0)
    tree = searcher(distribution_evaluator, config)(states, jax.random.key(0)).tree
    root = jax.tree.map(lambda x: x[0], tree)
    noise = 0.1

    def picks(keys, noise):  # the noise is static, as in a search's root rule
        rule = functools.partial(_selection.katago_puct, root_fpu_reduction=0.1)
        select = jax.vmap(lambda key: rule(key, root, 0, 0, wide_root_noise=noise))
        return fast_jit(select)(keys)

    keys = jax.random.split(jax.random.key(7), 4000)
    ours = np.bincount(np.asarray(picks(keys, noise)), minlength=tree.num_actions) / len(keys)
    quiet = np.bincount(np.asarray(picks(keys, 0.0)), minlength=tree.num_actions)
    assert np.count_nonzero(quiet) == 1  # premise: without it one move is always picked
    base = katago_scores(tree, 0, 0, 0.1, policy_power=1.0 / (4.0 * noise + 1.0))
    rng = np.random.default_rng(0)
    draws = 200_000
    coin = rng.random((draws, base.size)) < 0.5
    bonus = np.where(coin, noise * np.abs(rng.standard_normal((draws, base.size))), 0.0)
    theirs = np.bincount(np.argmax(base + bonus, axis=1), minlength=base.size) / draws
    assert np.count_nonzero(theirs > 0.02) >= 3  # premise: the noise spreads the picks
    assert 0.5 * np.abs(ours - theirs).sum() < 0.04, (ours.round(3), theirs.round(3))


def test_wide_root_noise_widens_the_search_and_leaves_the_move_to_the_visits():
    """A search with wideRootNoise visits more root moves; without it, fewer (5x5, uniform
    prior, root FPU 0.2 so that few moves are tried), and a config leaves it out where
    KataGo does."""
    narrow = root_moves_searched(root_fpu_reduction=0.2)
    wide = root_moves_searched(root_fpu_reduction=0.2, wide_root_noise=0.5)
    assert wide > narrow, (wide, narrow)
    config = SearchConfig(kind="katago", wide_root_noise=0.04)
    assert config.without_root_exploration().wide_root_noise == 0.0
    with pytest.raises(ValueError, match="wide_root_noise needs kind='katago'"):
        SearchConfig(kind="puct", wide_root_noise=0.04)
    with pytest.raises(ValueError, match=r"wide_root_noise must be in \[0, 5\]"):
        SearchConfig(kind="katago", wide_root_noise=6.0)


def test_a_winning_capture_draws_the_visits():
    """With a uniform value 0, the capture that wins at once backs up wins, and first-play
    urgency keeps the other moves from drawing more than their share."""
    states = batch(position(**CAPTURE), 2)
    config = SearchConfig(kind="katago", num_simulations=40, temperature_moves=0)
    out = searcher(UNIFORM, config)(states, jax.random.key(2))
    visits = np.asarray(out.visit_counts)
    assert visits.sum(axis=1).tolist() == [40, 40]
    assert np.all(visits[:, CAPTURE_MOVE] > visits.sum(axis=1) / 2)


@pytest.mark.parametrize(
    "setup, move, simulations",
    [
        (CAPTURE, CAPTURE_MOVE, 32),
        (dict(SAVE, max_moves=2), SAVE_MOVE, 64),
        (dict(SAVE, max_moves=4), SAVE_MOVE, 256),
        (ENDING, ENDING_MOVE, 256),
    ],
)
def test_finds_the_only_winning_move(setup, move, simulations):
    states = batch(position(**setup), 4)
    config = SearchConfig(
        kind="katago", num_simulations=simulations, dirichlet_fraction=0.0, temperature_moves=0
    )
    out = searcher(UNIFORM, config)(states, jax.random.key(3))
    np.testing.assert_array_equal(out.action, move)
    assert np.all(np.asarray(out.q_values)[:, move] > 0.0)


def test_no_illegal_edge_with_root_noise():
    states = batch(gojax.new_game(5, komi=0.5, max_moves=10), 3)
    config = SearchConfig(kind="katago", num_simulations=96, dirichlet_fraction=0.25)
    out = searcher(scoring_evaluator, config)(states, jax.random.key(4))
    legal = legal_in_tree(out.tree)
    edges = list(walk_edges(out.tree))
    assert len(edges) > 100
    for b, parent, action, _ in edges:
        assert legal[b, parent, action], (b, parent, action)


def test_tree_reuse_continues_a_katago_search():
    from gojax.search import reuse_subtree

    states = batch(gojax.new_game(5, komi=0.5), 2)
    config = SearchConfig(kind="katago", num_simulations=32, dirichlet_fraction=0.0)
    first = searcher(scoring_evaluator, config)(states, jax.random.key(5))
    after = jax.vmap(gojax.play)(states, first.action)
    kept = fast_jit(reuse_subtree)(first.tree, first.action)
    carried = np.asarray(kept.node_visits[:, 0])
    assert np.all(carried >= 1)
    out = fast_jit(functools.partial(search, scoring_evaluator, config=config))(
        after, jax.random.key(6), tree=kept
    )
    np.testing.assert_array_equal(np.asarray(out.simulations), 33 - carried)
    assert np.all(np.asarray(out.tree.node_visits[:, 0]) == 33)


def test_katago_kind_is_checked():
    with pytest.raises(ValueError, match="forced_playouts"):
        SearchConfig(kind="katago", forced_playouts=2.0)
    assert SearchConfig(kind="katago", lcb_selection=True).lcb_selection  # as KataGo plays
    with pytest.raises(ValueError, match="fpu_reduction needs kind='katago'"):
        SearchConfig(kind="puct", fpu_reduction=0.0)
    with pytest.raises(ValueError, match=r"cpuct_utility_stdev_scale must be in \[0, 1\]"):
        SearchConfig(kind="katago", cpuct_utility_stdev_scale=1.5)
    assert SearchConfig(kind="katago", dirichlet_fraction=0.25).root_fpu == 0.0  # KataGo's
    assert SearchConfig(kind="katago", dirichlet_fraction=0.0).root_fpu == 0.1
    assert SearchConfig(kind="katago", root_fpu_reduction=0.3).root_fpu == 0.3
