"""KataGo's forced playouts and policy target pruning (``SearchConfig.forced_playouts``).

Searches of a 9x9 opening with a random evaluator (random priors and values,
so that the root's children differ), checked against the rule as the paper
words it: a root child visited fewer than ``sqrt(k P sum N)`` times is visited
next; the policy target then takes visits back from every child but the most
visited, one at a time, while its PUCT score stays below the best child's and
no more than ``n_forced`` are taken, and drops a child so reduced to one visit.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from boards import fast_jit, new_game

from gojax import _selection
from gojax.search import SearchConfig, root_stats, search

K = 2.0  # KataGo's self-play value
SIMS = 64
GAMES = 8


def random_evaluator(states, key):
    """Priors and values drawn at random per node: a different tree in every game."""
    batch = states.to_play.shape[0]
    logits = 0.7 * jax.random.normal(key, (batch, states.num_actions))
    return logits, jax.random.uniform(key, (batch,), minval=-0.5, maxval=0.5)


@functools.cache
def searched(forced_playouts: float, temperature_moves: int = 0):
    config = SearchConfig(
        num_simulations=SIMS, forced_playouts=forced_playouts, temperature_moves=temperature_moves
    )
    states = jax.tree.map(lambda x: jnp.stack([x] * GAMES), new_game(9, komi=7.0))
    return fast_jit(functools.partial(search, random_evaluator, config=config))(
        states, jax.random.key(4)
    )


def forced(tree: mctx.Tree) -> tuple[np.ndarray, np.ndarray]:
    """``[B, A]`` root visits and ``n_forced`` of a batched tree (NumPy)."""
    stats = root_stats(tree)
    visits, prior = np.asarray(stats.visits), np.asarray(stats.prior, np.float64)
    return visits, np.sqrt(K * prior * visits.sum(1, keepdims=True))


def test_visited_children_get_their_forced_playouts():
    plain, plain_forced = forced(searched(0.0).tree)
    visits, n_forced = forced(searched(K).tree)
    plain_below = (plain > 0) & (plain < np.floor(plain_forced))
    assert plain_below.sum() >= GAMES // 2  # premise: PUCT alone leaves children short
    # Forcing is checked before every simulation: at the end a child lags its (grown)
    # n_forced by less than a visit, or more only if first visited in the last few
    # simulations (none is, here).
    assert not ((visits > 0) & (visits < np.floor(n_forced))).any()
    assert (visits >= 2).sum() > (plain >= 2).sum()
    np.testing.assert_array_equal(visits.sum(1), SIMS)


def test_root_rule_picks_a_forced_child_first():
    tree = searched(0.0).tree
    visits, n_forced = forced(tree)
    rule = functools.partial(_selection.puct, pb_c_init=1.25, pb_c_base=19652.0, depth=0)
    key = jax.random.key(0)
    games_with_forced = 0
    for b in range(GAMES):
        one = jax.tree.map(lambda x, b=b: x[b], tree)
        chosen = int(rule(key, one, 0, forced_playouts=K))
        short = np.flatnonzero((visits[b] > 0) & (visits[b] < n_forced[b]))
        if short.size:
            games_with_forced += 1
            assert chosen in short
        else:
            assert chosen == int(rule(key, one, 0))
    assert 0 < games_with_forced < GAMES  # premise: both cases occur


def reference_pruning(tree: mctx.Tree, b: int) -> np.ndarray:
    """The paper's policy target pruning for game ``b``, one visit at a time (float64)."""
    one = jax.tree.map(lambda x: x[b], tree)
    value = np.asarray(mctx.qtransform_by_parent_and_siblings(one, 0), np.float64)
    visits = np.asarray(one.children_visits[0]).astype(np.int64)
    prior = np.asarray(jax.nn.softmax(one.children_prior_logits[0]), np.float64)
    parent = float(one.node_visits[0])
    scale = np.sqrt(parent) * (1.25 + np.log((parent + 19652.0 + 1.0) / 19652.0))

    def puct(c, n):
        return value[c] + scale * prior[c] / (n + 1)

    best = int(np.argmax(visits))
    kept = visits.copy()
    for c in np.flatnonzero(visits):
        if c == best:
            continue
        n_forced = np.sqrt(K * prior[c] * visits.sum())
        while kept[c] > 0 and visits[c] - kept[c] + 1 <= n_forced:
            if puct(c, kept[c] - 1) >= puct(best, visits[best]):
                break
            kept[c] -= 1
        if kept[c] < visits[c] and kept[c] <= 1:
            kept[c] = 0
    return kept


def test_policy_target_pruning_matches_the_paper_rule():
    out = searched(K)
    tree = out.tree
    visits = np.asarray(out.visit_counts)
    pruned = np.stack([reference_pruning(tree, b) for b in range(GAMES)])
    ours = np.asarray(
        jax.vmap(
            functools.partial(
                _selection.pruned_visits, forced_playouts=K, pb_c_init=1.25, pb_c_base=19652.0
            ),
            in_axes=[0, None],
        )(tree, 0)
    )
    np.testing.assert_array_equal(ours, pruned)
    assert (pruned < visits).sum() >= GAMES // 2  # premise: visits are taken back
    assert ((pruned == 0) & (visits > 0)).any()  # and children dropped
    # The target is the pruned visits, normalised; the most visited move keeps its visits.
    np.testing.assert_allclose(out.action_weights, pruned / pruned.sum(1, keepdims=True), rtol=1e-6)
    rows = np.arange(GAMES)
    best = visits.argmax(1)
    np.testing.assert_array_equal(pruned[rows, best], visits[rows, best])


def test_sampled_moves_come_from_the_pruned_target():
    out = searched(K, temperature_moves=99)
    weights = np.asarray(out.action_weights)
    assert np.all(weights[np.arange(GAMES), np.asarray(out.action)] > 0)
    greedy = searched(K)
    visits = np.asarray(greedy.visit_counts)
    np.testing.assert_array_equal(
        visits[np.arange(GAMES), np.asarray(greedy.action)], visits.max(1)
    )


def test_off_by_default_and_puct_only():
    assert SearchConfig().forced_playouts == 0.0
    with pytest.raises(ValueError, match="forced_playouts needs kind='puct'"):
        SearchConfig(kind="gumbel", forced_playouts=2.0)
    with pytest.raises(ValueError, match="forced_playouts must be >= 0"):
        SearchConfig(forced_playouts=-1.0)
