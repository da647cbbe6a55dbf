"""Virtual loss and many leaves per step (``SearchConfig.leaf_batch``, ``gojax._virtual_loss``).

One descent per step builds the search's trees node for node; with ``K`` descents per
step every count is still the real simulations', every step evaluates its leaves in
one evaluator call and no leaf twice, and the virtual loss spreads a step's descents.
Small 5x5 positions that end within a few plies put finished games inside the trees.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, jit_play, new_game, position
from test_score_utility import distribution_evaluator
from test_search import (
    CAPTURE,
    KO,
    adversarial_evaluator,
    batch,
    legal_in_tree,
    reuse_jit,
    stack,
    walk_edges,
)

import gojax
import gojax.search as search_module
from gojax.search import SearchConfig, search

# Three games, two plies from their end at most: finished games at depth 1 and 2.
GAMES = (
    position(KO, to_play="B", max_moves=4),
    position(**dict(CAPTURE, max_moves=4)),
    new_game(5, komi=0.5, max_moves=4),
)
EVALUATORS = {"puct": adversarial_evaluator, "katago": distribution_evaluator}
EVALUATORS["gumbel"] = adversarial_evaluator


def config(kind: str, **kwargs) -> SearchConfig:
    defaults = dict(kind=kind, temperature_moves=0, max_num_considered_actions=8)
    return SearchConfig(**(defaults | kwargs))


def recording(evaluator, calls: list):
    """``evaluator`` appending, at each call, the ``[B * K]`` positions it was asked to
    evaluate (those not shown as finished games) as a bool mask."""

    def evaluate(states, key):
        jax.debug.callback(lambda done: calls.append(~np.asarray(done)), states.terminated)
        return evaluator(states, key)

    return evaluate


@functools.cache
def run(evaluator, config: SearchConfig):
    return fast_jit(functools.partial(search, evaluator, config=config))


def check_counts(tree, simulations: int) -> None:
    """Every count is the real simulations': each edge's visits and value are its child's
    (no virtual loss left), a node's visits are one of its own plus its children's (a
    finished game: all its own), the root has ``simulations + 1``. No illegal edge, nothing
    below a finished game."""
    visits = np.asarray(tree.node_visits)
    children = np.asarray(tree.children_visits)
    index = np.asarray(tree.children_index)
    done = np.asarray(tree.embeddings.terminated)
    edge_values, node_values = np.asarray(tree.children_values), np.asarray(tree.node_values)
    legal = legal_in_tree(tree)
    np.testing.assert_array_equal(visits[:, 0], simulations + 1)
    np.testing.assert_array_equal(children[:, 0].sum(1), simulations)
    for b, parent, action, child in walk_edges(tree):
        assert children[b, parent, action] == visits[b, child], (b, parent, action)
        assert edge_values[b, parent, action] == node_values[b, child]
        assert legal[b, parent, action], (b, parent, action)
    live = (visits > 0) & ~done
    np.testing.assert_array_equal(visits[live], 1 + children.sum(-1)[live])
    assert np.all(index[done] == -1) and np.all(children[done] == 0)
    # Unvisited edges hold nothing: a virtual loss never reaches the tree.
    untouched = index == -1
    assert np.all(children[untouched] == 0)
    assert np.all(edge_values[untouched] == 0)


# ----------------------------------------------------------------------------
# One descent per step: the plain search.


@pytest.mark.parametrize("kind", ["puct", "katago", "gumbel"])
def test_one_leaf_per_step_builds_the_plain_search_trees(kind, monkeypatch):
    """The batched loop at ``K = 1`` against the plain loop (``leaf_batch=1``'s), node for
    node: same nodes, edges and counts; values to float rounding (the two programs
    compile differently)."""
    states = stack(GAMES)
    cfg = config(kind, num_simulations=40)
    evaluator = EVALUATORS[kind]

    def go(states, key, tree=None):
        return search(evaluator, states, key, cfg, tree=tree)

    plain = fast_jit(go)
    first = plain(states, jax.random.key(3))
    runs = [(first, None)]
    if kind != "gumbel":  # and a kept tree
        nxt = jax.vmap(gojax.play)(states, first.action)
        runs.append((plain(nxt, jax.random.key(4), reuse_jit()(first.tree, first.action)), nxt))

    def one_per_step(tree, key, evaluator, rules, target, max_depth, moves, utility, cache):
        return search_module._run_batched_simulations(
            tree, key, evaluator, rules, target, max_depth, moves, utility,
            leaf_batch=1, virtual_loss=1, halving=kind == "gumbel", cache=cache,
        )  # fmt: skip

    monkeypatch.setattr(search_module, "_run_simulations", one_per_step)
    batched = fast_jit(go)  # traced anew, with the batched loop
    again = [batched(states, jax.random.key(3))]
    if kind != "gumbel":
        again.append(batched(runs[1][1], jax.random.key(4), reuse_jit()(first.tree, first.action)))
    assert np.any(np.asarray(first.tree.embeddings.terminated))  # premise: finished games
    for (expected, _), got in zip(runs, again, strict=True):
        np.testing.assert_array_equal(got.action, expected.action)
        np.testing.assert_array_equal(got.simulations, expected.simulations)
        for name in ("node_visits", "children_visits", "children_index", "parents"):
            np.testing.assert_array_equal(getattr(got.tree, name), getattr(expected.tree, name))
        for name in ("node_values", "children_values", "node_scores", "node_score_utilities"):
            np.testing.assert_allclose(
                getattr(got.tree, name), getattr(expected.tree, name), atol=2e-6, err_msg=name
            )
        np.testing.assert_allclose(got.action_weights, expected.action_weights, atol=2e-6)


# ----------------------------------------------------------------------------
# K descents per step.


@pytest.mark.parametrize("kind", ["puct", "katago", "gumbel"])
@pytest.mark.parametrize("virtual_loss", [1, 0])
def test_counts_are_the_real_simulations_and_no_leaf_is_evaluated_twice(kind, virtual_loss):
    """30 simulations in steps of 4 (the last of 2): exact counts, one evaluator call of
    ``B * K`` positions per step, each new node evaluated once and nothing else. Without
    virtual loss the descents of a step mostly repeat each other: dropped, not
    evaluated, made up by more steps."""
    states = stack(GAMES)
    calls: list = []
    evaluator = recording(EVALUATORS[kind], calls)
    cfg = config(kind, num_simulations=30, leaf_batch=4, virtual_loss=virtual_loss)
    out = run(evaluator, cfg)(states, jax.random.key(5))
    jax.block_until_ready(out)
    np.testing.assert_array_equal(out.simulations, 30)
    check_counts(out.tree, 30)
    root, steps = calls[0], calls[1:]
    assert root.shape == (3,) and all(step.shape == (3 * 4,) for step in steps)
    # Each live non-root node was evaluated once, in the step that created it, and no
    # other position was: a finished game is never evaluated, a repeated leaf neither.
    visits = np.asarray(out.tree.node_visits)
    live = (visits > 0) & ~np.asarray(out.tree.embeddings.terminated)
    evaluated = np.sum([step.reshape(3, 4).sum(1) for step in steps], axis=0)
    np.testing.assert_array_equal(evaluated, live[:, 1:].sum(1))
    if virtual_loss:
        assert len(steps) == 8  # ceil(30 / 4): the virtual loss kept the descents apart
    else:
        assert len(steps) > 8


def test_states_with_an_empty_field_batch_their_leaves():
    """Rules without a superko history (chinese: ``superko_keys`` is ``[B, 0, 2]``) keep
    a 0-sized axis in every state; a step's ``[B, K]`` leaves still flatten to ``B * K``
    (``gojax gtp --rules chinese --leaf-batch 8`` failed here)."""
    states = batch(new_game(5, komi=0.5, rules="chinese"), 2)
    assert states.superko_keys.shape[1] == 0
    out = run(distribution_evaluator, config("katago", num_simulations=12, leaf_batch=4))(
        states, jax.random.key(1)
    )
    check_counts(out.tree, 12)


def _favourite(states, key):
    """A mild favourite, the centre (action 12: 6% of the prior, the others 4%), value 0:
    every rule's first choice. (mctx's PUCT values an unvisited move at the worst of its
    siblings, a lost one's value: there a virtual loss weighs only through its visit,
    which halves the favourite's exploration term.)"""
    del key
    logits = jnp.where(jnp.arange(states.num_actions) == 12, 0.5, 0.0)
    logits = jnp.broadcast_to(logits, (states.to_play.shape[0], states.num_actions))
    return logits.astype(jnp.float32), jnp.zeros(states.to_play.shape, jnp.float32)


@pytest.mark.parametrize("kind", ["puct", "katago"])
def test_virtual_loss_sends_the_second_descent_elsewhere(kind):
    states = batch(new_game(5, komi=0.5), 1)
    visits = {}
    for virtual_loss in (1, 0):
        calls: list = []
        cfg = config(
            kind, num_simulations=2, leaf_batch=2, virtual_loss=virtual_loss, dirichlet_fraction=0.0
        )
        out = run(recording(_favourite, calls), cfg)(states, jax.random.key(0))
        jax.block_until_ready(out)
        visits[virtual_loss] = (np.asarray(out.visit_counts[0]), len(calls))
    spread, calls = visits[1]
    assert calls == 2 and spread[12] == 1 and spread.sum() == 2  # both in one step
    # Without it the second descent took the same leaf: dropped (not evaluated), made up by
    # a step of its own.
    alone, calls = visits[0]
    assert calls == 3 and alone[12] >= 1 and alone.sum() == 2


def test_gumbel_batches_the_halving_schedule():
    """The root's visits follow sequential halving's schedule, ``K`` slots at a time: the
    same visit counts as one at a time (the moves behind them may differ)."""
    states = stack(GAMES[:1] + GAMES[2:])
    counts = {}
    for k in (1, 4):
        cfg = config("gumbel", num_simulations=32, leaf_batch=k, max_num_considered_actions=4)
        out = run(adversarial_evaluator, cfg)(states, jax.random.key(8))
        counts[k] = np.sort(np.asarray(out.visit_counts), axis=1)
    np.testing.assert_array_equal(counts[4], counts[1])


def test_batched_games_kept_trees_and_parts():
    """Games with different targets (one continues a kept tree, one starts fresh, one stops
    early): each gets exactly its simulations, and a stopped search resumed runs the rest."""
    state = position(KO, to_play="B")
    cfg = config("puct", num_simulations=24, leaf_batch=4)
    first = run(adversarial_evaluator, cfg)(batch(state, 1), jax.random.key(1))
    child = int(first.visit_counts[0, first.action[0]])
    kept = reuse_jit()(first.tree, first.action)
    nxt = jax.tree.map(lambda x: x[0], batch(jit_play(state, int(first.action[0])), 1))
    states = stack([nxt, state, state])
    trees = jax.tree.map(lambda x: jnp.concatenate([x, x, x]), kept)

    def go(states, key, tree, stop_at, resume):
        return search(adversarial_evaluator, states, key, cfg, tree, stop_at=stop_at, resume=resume)

    part = fast_jit(go, static_argnames="resume")
    stop = jnp.array([25, 25, 11], jnp.int32)
    out = part(states, jax.random.key(2), trees, stop, False)
    np.testing.assert_array_equal(out.simulations, [24 + 1 - child, 24, 10])
    np.testing.assert_array_equal(out.tree.node_visits[:, 0], [25, 25, 11])
    rest = part(states, jax.random.key(3), out.tree, jnp.full(3, 25, jnp.int32), True)
    np.testing.assert_array_equal(rest.simulations, [0, 0, 14])
    check_counts(rest.tree, 24)


def test_under_vmap():
    """``search`` vmapped over a second batch axis: the counts stay exact."""
    states = jax.tree.map(lambda x: x.reshape((2, 2) + x.shape[1:]), batch(GAMES[0], 4))
    cfg = config("katago", num_simulations=12, leaf_batch=4)
    keys = jax.random.split(jax.random.key(6), 2)
    out = fast_jit(jax.vmap(functools.partial(search, distribution_evaluator, config=cfg)))(
        states, keys
    )
    np.testing.assert_array_equal(out.simulations, 12)
    np.testing.assert_array_equal(out.tree.node_visits[..., 0], 13)
    np.testing.assert_array_equal(out.visit_counts.sum(-1), 12)


def test_leaf_batch_settings():
    for bad in (dict(leaf_batch=0), dict(leaf_batch=2.5), dict(virtual_loss=-1)):
        with pytest.raises(ValueError, match="whole number"):
            SearchConfig(**bad)
    assert SearchConfig(leaf_batch=8, virtual_loss=0).leaf_batch == 8


# ----------------------------------------------------------------------------
# The GTP engine's knob.


def test_gtp_leaf_batch_flag():
    """``gojax gtp --leaf-batch K`` searches with K leaves a step; the default is the
    device's (1 on a CPU: the search as it was)."""
    import argparse
    import io
    import re

    from reference import reference_path
    from test_gtp import MODEL, ask, gtp_flags

    from eval.gtp import GTPServer, default_leaf_batch, make_engine

    argv = ["--model", str(reference_path("katago", MODEL)), "--player", "search"]
    argv += ["--visits", "9", "--search", "katago", "--symmetry", "0", "--size", "9"]
    assert gtp_flags(*argv)["leaf_batch"] is None
    if jax.default_backend() == "cpu":
        assert default_leaf_batch() == 1
    engine = make_engine(argparse.Namespace(**gtp_flags(*argv, "--leaf-batch", "4")))
    assert engine.player.config.leaf_batch == 4
    # Its visits spread under virtual loss: it plays the best bound (PLAY_LCB) by default.
    config = engine.player.config
    assert (config.lcb_selection, config.lcb_stdevs, config.lcb_stdev_floor) == (True, 3.0, 0.4)
    unbound = make_engine(argparse.Namespace(**gtp_flags(*argv, "--leaf-batch", "4", "--no-lcb")))
    assert not unbound.player.config.lcb_selection
    assert not make_engine(argparse.Namespace(**gtp_flags(*argv))).player.config.lcb_selection
    reply = ask(GTPServer(engine, io.StringIO()), "kata-genmove_analyze b 1").split("\n")
    entries = [e for e in re.split(r" (?=info )", reply[1]) if " isSymmetryOf " not in e]
    assert sum(int(re.search(r" visits (\d+)", e).group(1)) for e in entries) == 9
