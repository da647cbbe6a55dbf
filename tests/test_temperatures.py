"""KataGo's temperatures. The root policy temperature (``SearchConfig.root_policy_temperature``
and ``root_policy_temperature_early``): the root's prior is the evaluator's raised to
``1 / T`` and renormalised, ``T`` moving from the early value to the late one with the
move number, and a kept tree's root is tempered once, from the evaluator's prior, never
twice. The move temperature (``move_temperature``, ``move_temperature_early``): the move
played is sampled proportionally to ``visits ** (1 / T)``, the best one at ``T`` near 0."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit
from test_search import batch, searcher, stack

import gojax
from gojax.search import SearchConfig, reuse_subtree, search
from train.selfplay import fast_search


def shifting_evaluator(states: gojax.GoState, key: jax.Array):
    """A fixed, uneven prior that differs from position to position (a child's is not
    its parent's), and value 0."""
    del key
    actions = jnp.arange(states.num_actions, dtype=jnp.float32)
    shift = states.move_number.astype(jnp.float32)[:, None] * 7.0
    logits = -0.35 * jnp.mod(actions[None, :] + shift, float(states.num_actions))
    return logits, jnp.zeros(states.to_play.shape, jnp.float32)


def evaluator_prior(states: gojax.GoState) -> np.ndarray:
    """``[B, A]`` the evaluator's prior over the legal moves (float64)."""
    logits = np.asarray(shifting_evaluator(states, None)[0], np.float64)
    legal = np.asarray(jax.vmap(gojax.legal_moves)(states))
    prior = np.where(legal, np.exp(logits - logits.max(axis=1, keepdims=True)), 0.0)
    return prior / prior.sum(axis=1, keepdims=True)


def katago_tempered(prior: np.ndarray, temperature: float) -> np.ndarray:
    """KataGo's tempering of a root policy (``maybeAddPolicyNoiseAndTemp``): each legal
    probability to the power ``1 / T``, relative to the largest, then normalised."""
    powered = np.where(
        prior > 0,
        np.exp((np.log(np.maximum(prior, 1e-300)) - np.log(prior.max())) / temperature),
        0.0,
    )
    return powered / powered.sum()


def root_prior(tree, game: int = 0) -> np.ndarray:
    return np.asarray(jax.nn.softmax(tree.children_prior_logits[game, 0]), np.float64)


def config(kind: str = "puct", simulations: int = 16, **fields) -> SearchConfig:
    return SearchConfig(
        kind=kind,
        num_simulations=simulations,
        dirichlet_fraction=0.0,
        temperature_moves=0,
        **fields,
    )


def after(moves: list[int], size: int = 5) -> gojax.GoState:
    state = gojax.new_game(size, komi=0.5)
    for move in moves:
        state = gojax.play(state, move)
    return state


@pytest.mark.parametrize("kind", ["puct", "katago"])
@pytest.mark.parametrize("temperature", [0.5, 2.5])
def test_the_root_prior_is_the_evaluators_raised_to_one_over_t(kind, temperature):
    states = batch(after([6]), 1)
    out = searcher(shifting_evaluator, config(kind, root_policy_temperature=temperature))(
        states, jax.random.key(0)
    )
    want = katago_tempered(evaluator_prior(states)[0], temperature)
    np.testing.assert_allclose(root_prior(out.tree), want, atol=1e-6)
    # Below the root the prior is the evaluator's own.
    child = int(np.argmax(np.asarray(out.tree.children_visits[0, 0])))
    node = int(out.tree.children_index[0, 0, child])
    kid = jax.tree.map(lambda x: x[:, node], out.tree.embeddings)
    below = np.asarray(jax.nn.softmax(out.tree.children_prior_logits[0, node]))
    np.testing.assert_allclose(below, evaluator_prior(kid)[0], atol=1e-6)


def test_the_early_temperature_gives_way_to_the_late_one_by_halflives():
    # KataGo's interpolation: T = late + (early - late) 0.5 ** (moves / 19 * 19 / size); on
    # 5x5 a halflife is 5 moves.
    early, late = 3.0, 1.5
    cfg = config(root_policy_temperature=late, root_policy_temperature_early=early)
    moves = jnp.asarray([0, 5, 10, 1000])
    np.testing.assert_allclose(
        np.asarray(cfg.root_temperature(moves, 5)), [3.0, 2.25, 1.875, 1.5], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(cfg.root_temperature(moves[:2], 19)),
        [3.0, 3.0 - 1.5 * (1 - 0.5 ** (5 / 19))],
        rtol=1e-6,
    )
    states = stack([after([]), after([6, 18, 8, 16, 12])])
    out = searcher(shifting_evaluator, cfg)(states, jax.random.key(1))
    prior = evaluator_prior(states)
    for game, temperature in ((0, 3.0), (1, 2.25)):
        np.testing.assert_allclose(
            root_prior(out.tree, game), katago_tempered(prior[game], temperature), atol=1e-6
        )
    # Unset, the early temperature is the late one.
    assert float(config(root_policy_temperature=late).root_temperature(moves[:1], 5)[0]) == late


def test_a_kept_root_is_tempered_once_from_the_evaluators_prior():
    cfg = config(simulations=12, root_policy_temperature=2.0)
    run = searcher(shifting_evaluator, cfg)
    states = batch(after([6]), 1)
    prior = evaluator_prior(states)[0]
    first = run(states, jax.random.key(2))
    once = katago_tempered(prior, 2.0)
    # The tree keeps the evaluator's prior beside the tempered one it searched with.
    np.testing.assert_allclose(
        np.asarray(jax.nn.softmax(first.tree.extra_data.root_prior[0])), prior, atol=1e-6
    )
    # The same root searched on (GTP's genmove after an analysis of the position).
    again = run(states, jax.random.key(3), tree=first.tree)
    assert int(again.tree.node_visits[0, 0]) == 13 and int(again.simulations[0]) == 0
    np.testing.assert_allclose(root_prior(again.tree), once, atol=1e-6)
    assert not np.allclose(katago_tempered(prior, 4.0), once, atol=1e-3)  # twice would show
    # A kept subtree: its root was a child, searched with the evaluator's prior.
    action = int(first.action[0])
    kept = fast_jit(reuse_subtree)(first.tree, first.action)
    np.testing.assert_array_equal(
        np.asarray(kept.extra_data.root_prior), np.asarray(kept.children_prior_logits[:, 0])
    )
    child = batch(after([6, action]), 1)
    below = run(child, jax.random.key(4), tree=kept)
    assert int(below.simulations[0]) < 12  # the subtree's visits were kept
    np.testing.assert_allclose(
        root_prior(below.tree), katago_tempered(evaluator_prior(child)[0], 2.0), atol=1e-6
    )


def test_a_search_resumed_in_parts_keeps_its_tempered_root():
    cfg = config(simulations=20, root_policy_temperature=1.7)
    states = batch(after([6]), 1)
    whole = searcher(shifting_evaluator, cfg)(states, jax.random.key(5))
    run = fast_jit(
        lambda states, key, tree, stop_at, resume: search(
            shifting_evaluator, states, key, cfg, tree=tree, stop_at=stop_at, resume=resume
        ),
        static_argnames=("resume",),
    )
    part = run(states, jax.random.key(5), None, 8, False)
    rest = run(states, jax.random.key(5), part.tree, None, True)
    np.testing.assert_allclose(root_prior(rest.tree), root_prior(whole.tree), atol=1e-7)
    np.testing.assert_array_equal(np.asarray(rest.visit_counts), np.asarray(whole.visit_counts))


def test_a_hotter_root_spreads_the_visits_over_more_moves():
    def moves_visited(temperature: float) -> int:
        cfg = config(simulations=40, root_policy_temperature=temperature)
        out = searcher(shifting_evaluator, cfg)(batch(after([6]), 1), jax.random.key(6))
        return int(np.sum(np.asarray(out.visit_counts[0]) > 0))

    cold, plain, hot = (moves_visited(t) for t in (0.5, 1.0, 4.0))
    assert cold < plain < hot, (cold, plain, hot)


def test_the_temperature_settings_are_checked():
    assert not config().tempers_root
    assert config(root_policy_temperature_early=1.25).tempers_root
    for fields in ({"root_policy_temperature": 0.0}, {"root_policy_temperature_early": 101.0}):
        with pytest.raises(ValueError, match=r"must be in \[0.01, 100\]"):
            config(**fields)
    for kind in ("gumbel", "uct"):
        with pytest.raises(
            ValueError, match="root policy temperature needs kind='puct' or 'katago'"
        ):
            SearchConfig(kind=kind, root_policy_temperature=1.1)
    # Searches that play for strength drop it, as KataGo's cheap searches do.
    selfplay = SearchConfig(
        root_policy_temperature=1.1, root_policy_temperature_early=1.25, forced_playouts=2.0
    )
    cheap = fast_search(selfplay, 8)
    assert not cheap.tempers_root and cheap.num_simulations == 8
    assert (cheap.dirichlet_fraction, cheap.forced_playouts) == (0.0, 0.0)
    assert dataclasses.replace(cheap, num_simulations=64) == selfplay.without_root_exploration()


def test_the_move_is_drawn_from_visits_to_the_power_one_over_t():
    games = 1000
    states = batch(after([6]), games)  # one position: the same visits in every game
    out = searcher(shifting_evaluator, config(simulations=12, move_temperature=0.5))(
        states, jax.random.key(7)
    )
    visits = np.asarray(out.visit_counts[0], np.float64)
    np.testing.assert_array_equal(np.asarray(out.visit_counts), np.tile(visits, (games, 1)))
    want = visits**2 / np.sum(visits**2)
    drawn = np.bincount(np.asarray(out.action), minlength=visits.size) / games
    np.testing.assert_allclose(drawn, want, atol=0.05)  # 3 standard errors at most
    assert np.abs(drawn - visits / visits.sum()).max() > 0.1  # not the visits at T = 1


def test_a_cold_move_temperature_plays_the_best_move_and_the_early_one_gives_way():
    states = stack([after([]), after([6, 18, 8, 16, 12] * 4)])  # moves 0 and 20
    greedy = searcher(shifting_evaluator, config(simulations=24))(states, jax.random.key(8))
    for key in range(4):
        cold = searcher(shifting_evaluator, config(simulations=24, move_temperature=0.0))(
            states, jax.random.key(key)
        )
        np.testing.assert_array_equal(np.asarray(cold.action), np.asarray(greedy.action))
    # 5 early, 0 late: on 5x5 four halflives (20 moves) leave 5/16 > 0: still sampled;
    # the interpolation itself is checked on the root temperature's.
    cfg = config(move_temperature=0.0, move_temperature_early=5.0)
    np.testing.assert_allclose(
        np.asarray(cfg.chosen_move_temperature(jnp.asarray([0, 5, 20]), 5)),
        [5.0, 2.5, 5.0 / 16],
        rtol=1e-6,
    )
    late = dataclasses.replace(cfg, temperature_halflife=0.1)  # gone by move 20
    assert float(late.chosen_move_temperature(jnp.asarray([20]), 5)[0]) < 1e-4
    hot = searcher(shifting_evaluator, dataclasses.replace(cfg, num_simulations=24))
    runs = [hot(states, jax.random.key(k)) for k in range(12)]
    drawn = {int(out.action[0]) for out in runs}
    assert len(drawn) > 1  # move 0 at temperature 5: not always the best move
    # However hot, never a move the search did not visit.
    assert all(int(out.visit_counts[0, int(out.action[0])]) > 0 for out in runs)
    played = searcher(shifting_evaluator, dataclasses.replace(late, num_simulations=24))
    for key in range(4):  # move 20 past the halflives: the best move
        action = played(states, jax.random.key(key)).action
        assert int(action[1]) == int(greedy.action[1])


def test_the_move_temperature_settings_are_checked():
    for fields, message in (
        ({"move_temperature": 5.5}, r"move_temperature must be in \[0, 5\]"),
        ({"move_temperature": 0.1, "move_temperature_early": -1}, "move_temperature_early must"),
        ({"move_temperature_early": 0.5}, "move_temperature_early needs move_temperature"),
        ({"temperature_halflife": 0.0}, r"temperature_halflife must be in \[0.1, 100000\]"),
    ):
        with pytest.raises(ValueError, match=message):
            config(**fields)
    with pytest.raises(ValueError, match="move_temperature does not apply to kind='gumbel'"):
        SearchConfig(kind="gumbel", move_temperature=0.5)
    # The cheap searches of self-play keep it: KataGo samples their moves alike.
    cheap = fast_search(config(move_temperature=0.15, move_temperature_early=0.75), 8)
    assert (cheap.move_temperature, cheap.move_temperature_early) == (0.15, 0.75)
