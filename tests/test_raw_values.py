"""PUCT on AlphaGo Zero's raw values (``SearchConfig(normalise_values=False)``).

Searches of a 9x9 opening with a random evaluator (random priors and values per
node), checked against the rule written out in NumPy: the child chosen next at
the root is the argmax of ``Q + c(N) sqrt(N) P / (1 + n)`` with ``Q`` the
child's mean value for the player to move (0 unvisited), where mctx's rule
normalises ``Q`` to [0, 1] between the parent's and the siblings' values.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, new_game
from test_forced_playouts import random_evaluator

from gojax import _selection
from gojax.search import SearchConfig, root_stats, search

SIMS = 32
GAMES = 8
C_INIT, C_BASE = 1.25, 19652.0


@functools.cache
def searched(normalise_values: bool):
    config = SearchConfig(
        num_simulations=SIMS, normalise_values=normalise_values, dirichlet_fraction=0.0
    )
    states = jax.tree.map(lambda x: jnp.stack([x] * GAMES), new_game(9, komi=7.0))
    return fast_jit(functools.partial(search, random_evaluator, config=config))(
        states, jax.random.key(3)
    )


def test_raw_values_are_the_mean_values_and_zero_unvisited():
    tree = searched(False).tree
    one = jax.tree.map(lambda x: x[0], tree)
    raw = np.asarray(_selection.puct_values(one, 0, normalised=False))
    visits = np.asarray(one.children_visits[0])
    q = np.asarray(one.qvalues(0))
    np.testing.assert_allclose(raw[visits > 0], q[visits > 0])
    assert (raw[visits == 0] == 0).all() and (visits == 0).any()
    normalised = np.asarray(_selection.puct_values(one, 0, normalised=True))
    assert normalised.min() >= 0 and normalised.max() <= 1
    assert np.abs(raw[visits > 0]).max() <= 0.5 + 1e-6  # the evaluator's range, unscaled


def test_the_root_choice_is_agz_puct_on_raw_values():
    tree = searched(False).tree
    rule = functools.partial(_selection.puct, pb_c_init=C_INIT, pb_c_base=C_BASE, normalised=False)
    keys = jax.random.split(jax.random.key(0), GAMES)
    chosen = jax.vmap(lambda t, k: rule(k, t, 0, 0))(tree, keys)
    for game in range(GAMES):
        one = jax.tree.map(lambda x, g=game: x[g], tree)
        visits = np.asarray(one.children_visits[0], np.float64)
        prior = np.asarray(jax.nn.softmax(one.children_prior_logits[0]), np.float64)
        q = np.where(visits > 0, np.asarray(one.qvalues(0), np.float64), 0.0)
        n = float(np.asarray(one.node_visits[0]))
        scale = np.sqrt(n) * (C_INIT + np.log((n + C_BASE + 1) / C_BASE))
        score = q + scale * prior / (visits + 1)
        score[np.asarray(one.root_invalid_actions) > 0] = -np.inf
        assert int(chosen[game]) == int(np.argmax(score))


def test_raw_values_spread_the_visits_wider():
    """The same trees' root visits: raw values in [-0.5, 0.5] leave exploration more
    weight than values stretched to [0, 1], so the visits spread over more moves."""
    wide = np.asarray(root_stats(searched(False).tree).visits)
    narrow = np.asarray(root_stats(searched(True).tree).visits)
    assert (wide > 0).sum(1).mean() > (narrow > 0).sum(1).mean()
    assert wide.max(1).mean() < narrow.max(1).mean()


def test_raw_values_need_puct():
    with pytest.raises(ValueError, match="normalise_values=False needs kind='puct'"):
        SearchConfig(kind="katago", normalise_values=False)
