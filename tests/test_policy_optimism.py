"""Policy optimism in search: KataGo mixes its optimistic policy into the prior, 0.2 of
it at the root and all of it below (``rootPolicyOptimism``, ``policyOptimism``)."""

from __future__ import annotations

import argparse
import functools
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import reference_path
from test_gtp import ask, gtp_flags
from test_katago_versions import _config, _variables
from test_search import batch, reuse_jit, searcher

import gojax
from eval import players
from eval.analysis import AnalysisEngine
from eval.gtp import GTPServer, make_engine
from gojax import katago_model
from gojax.evaluate import evaluate
from gojax.search import SearchConfig, uniform_evaluator

SIZE = 5
MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"


def favour(action: int):
    """A root evaluator whose prior puts almost everything on ``action``."""

    def evaluate_roots(states, key):
        del key
        legal = jax.vmap(gojax.legal_moves)(states)
        logits = jnp.where(jnp.arange(legal.shape[-1]) == action, 8.0, 0.0)
        return jnp.broadcast_to(logits, legal.shape), jnp.zeros(legal.shape[0])

    return evaluate_roots


UNIFORM = uniform_evaluator()
ROOT = favour(7)
FIRST = favour(3)
CONFIG = SearchConfig(num_simulations=16, temperature_moves=0, dirichlet_fraction=0.0)


def _uniform_prior(tree, node: int) -> bool:
    prior = jax.nn.softmax(tree.children_prior_logits[0, node])
    legal = np.asarray(prior) > 1e-6
    return bool(np.allclose(np.asarray(prior)[legal], 1.0 / legal.sum(), atol=1e-6))


@functools.cache
def root_searcher():
    return jax.jit(
        lambda states, key, tree: gojax.search.search(
            UNIFORM, states, key, CONFIG, tree, root_evaluator=ROOT
        )
    )


def test_the_root_evaluator_gives_the_root_prior_and_only_that():
    state = batch(gojax.new_game(SIZE, komi=0.5), 1)
    out = root_searcher()(state, jax.random.key(0), None)
    root_prior = np.asarray(jax.nn.softmax(out.tree.children_prior_logits[0, 0]))
    assert root_prior[7] > 0.99
    assert int(out.action[0]) == 7
    assert _uniform_prior(out.tree, 1)  # the first child: the leaf evaluator's prior


def test_a_kept_root_takes_the_root_evaluators_prior_and_keeps_its_statistics():
    state = gojax.new_game(SIZE, komi=0.5)
    # A first search that spends its visits below action 3; the child there is evaluated
    # with a uniform prior over its legal moves (the favoured point is taken).
    first = searcher(FIRST, CONFIG)(batch(state, 1), jax.random.key(1))
    action = int(first.action[0])
    assert action == 3
    child = int(first.tree.children_index[0, 0, action])
    visits = int(first.tree.node_visits[0, child])
    assert visits >= 8 and _uniform_prior(first.tree, child)
    kept = reuse_jit()(first.tree, first.action)
    following = batch(gojax.play(state, action), 1)
    out = root_searcher()(following, jax.random.key(2), kept)
    assert int(out.tree.node_visits[0, 0]) == CONFIG.num_simulations + 1  # only the rest run
    root_prior = np.asarray(jax.nn.softmax(out.tree.children_prior_logits[0, 0]))
    assert root_prior[7] > 0.99  # the root's prior, not the one it had as a child
    # The kept root's value is the one it was evaluated with as a child.
    np.testing.assert_allclose(out.tree.raw_values[0, 0], first.tree.raw_values[0, child])


# ----------------------------------------------------------------------------
# KataGo nets with the optimistic head


@pytest.fixture(scope="module")
def net_file(tmp_path_factory) -> str:
    """A random model-version-15 net (optimistic policy head) on disk."""
    config = _config(15)
    path = tmp_path_factory.mktemp("net") / "v15.bin.gz"
    katago_model.save_model(path, config, _variables(config, seed=5), version=15, name="v15")
    return str(path)


def _policy(model, states, optimism: float) -> np.ndarray:
    module = model.module(policy_optimism=optimism)
    out = evaluate(module, model.variables, states, version=model.output_spec, symmetry=0)
    return np.asarray(out["policy"])


def test_defaults_are_katagos_for_nets_with_the_head_and_zero_for_others(net_file):
    optimistic = katago_model.load_model(net_file)
    plain = katago_model.load_model(reference_path("katago", MODEL))
    assert players.policy_optimism(optimistic) == (0.2, 1.0)
    assert players.policy_optimism(optimistic, 0.0, 0.5) == (0.0, 0.5)
    assert players.policy_optimism(plain) == (0.0, 0.0)
    assert players.policy_optimism(plain, 0.0, 0.0) == (0.0, 0.0)
    with pytest.raises(ValueError, match="needs a net with KataGo's optimistic policy"):
        players.policy_optimism(plain, None, 1.0)
    with pytest.raises(ValueError, match=r"must be in \[0, 1\], not 1.5"):
        players.policy_optimism(optimistic, 1.5)


def test_search_mixes_in_the_root_optimism_at_the_root_and_the_other_below(net_file):
    model = katago_model.load_model(net_file)
    run_search, run_evaluate, *_ = players._search_functions(model, 0, optimism=(0.2, 1.0))
    state = gojax.new_game(SIZE, komi=0.5)
    out = run_search(model.variables, batch(state, 1), jax.random.key(3), CONFIG, None, None)
    root = np.asarray(jax.nn.softmax(out.tree.children_prior_logits[0, 0]))
    at_root = _policy(model, batch(state, 1), 0.2)[0]
    np.testing.assert_allclose(root, at_root, atol=1e-5)
    assert not np.allclose(root, _policy(model, batch(state, 1), 1.0)[0], atol=1e-3)
    child = jax.tree.map(lambda x: x[:, 1], out.tree.embeddings)
    below = np.asarray(jax.nn.softmax(out.tree.children_prior_logits[0, 1]))
    np.testing.assert_allclose(below, _policy(model, child, 1.0)[0], atol=1e-5)
    assert not np.allclose(below, _policy(model, child, 0.2)[0], atol=1e-3)
    # The reported policy (the root row of the root-and-children evaluation) is the root's.
    rows = run_evaluate(model.variables, state, jnp.array([0, 1]), jax.random.key(4))
    np.testing.assert_allclose(rows["policy"][0], at_root, atol=1e-5)


def _args(**flags) -> argparse.Namespace:
    return argparse.Namespace(**(gtp_flags("--komi", "0.5", "--lag", "0") | flags))


@pytest.mark.slow
def test_gtp_plays_with_katagos_optimism_unless_told(net_file):
    engine = make_engine(_args(model=net_file, visits=8, size=SIZE))
    assert "policy optimism 0.2/1" in engine.player.name
    server = GTPServer(engine, io.StringIO(), version="test")
    assert ask(server, "genmove b").startswith("= ")
    off = make_engine(
        _args(model=net_file, visits=8, size=SIZE, root_policy_optimism=0.0, policy_optimism=0)
    )
    assert "optimism" not in off.player.name


def test_gtp_flags_name_the_optimism_and_refuse_nets_without_the_head(net_file):
    model = katago_model.load_model(net_file)
    search = players.SearchPlayer(model, optimism=players.policy_optimism(model), visits=8)
    assert search.name == "search(v15, 8 visits, policy optimism 0.2/1)"
    policy = players.PolicyPlayer(model, policy_optimism=0.2)
    assert policy.name == "policy(v15, policy optimism 0.2)"
    reference = reference_path("katago", MODEL)
    with pytest.raises(ValueError, match="g170-b6c96.* has none"):
        make_engine(_args(model=reference, policy_optimism=1.0))
    with pytest.raises(ValueError, match="--player uct has no network"):
        make_engine(_args(player="uct", policy_optimism=0.0))


def test_analysis_reports_the_roots_policy_with_optimism(net_file):
    from gojax.katago_features import forget_history

    model = katago_model.load_model(net_file)
    engine = AnalysisEngine(model, symmetry=0, visits=1, batch_size=2)
    assert engine.optimism == (0.2, 1.0)
    query = {
        "id": "q",
        "moves": [["B", "C3"]],
        "rules": "chinese",
        "komi": 0.5,
        "boardXSize": SIZE,
        "boardYSize": SIZE,
        "includePolicy": True,
    }
    stdout = io.StringIO()
    engine.serve(io.StringIO(json.dumps(query) + "\n"), stdout)
    (reply,) = [json.loads(line) for line in stdout.getvalue().splitlines()]
    # The analysis engine hides the moves before the position, as KataGo's.
    state = forget_history(gojax.play(gojax.new_game(SIZE, komi=0.5, rules="chinese"), 12))
    want = _policy(model, batch(state, 1), 0.2)[0]
    got = np.array(reply["policy"])
    legal = got >= 0
    np.testing.assert_allclose(got[legal], want[legal], atol=1e-5)
    assert not np.allclose(got[legal], _policy(model, batch(state, 1), 0.0)[0][legal], atol=1e-3)


def test_analyze_shows_the_policy_with_katagos_root_optimism(net_file, tmp_path, capsys):
    from eval.cli import main

    record = tmp_path / "game.sgf"
    record.write_text("(;GM[1]SZ[5]KM[0.5]RU[Chinese];B[cc];W[bd])")
    out = tmp_path / "out.json"
    argv = ["analyze", str(record), "--model", net_file, "--symmetry", "0", "--top", "26"]
    assert main([*argv, "--json", str(out)]) == 0
    assert "policy optimism 0.2" in capsys.readouterr().out
    summary = json.loads(out.read_text())
    assert summary["policy_optimism"] == 0.2
    model = katago_model.load_model(net_file)
    state = gojax.play(gojax.play(gojax.new_game(SIZE, komi=0.5, rules="chinese"), 12), 16)
    want = _policy(model, batch(state, 1), 0.2)[0]
    for move, probability in summary["policy"].items():
        assert probability == pytest.approx(want[gojax.gtp_to_action(move, SIZE)], abs=1e-5)
    assert main([*argv, "--policy-optimism", "0", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["policy_optimism"] == 0.0
    reference = reference_path("katago", MODEL)
    assert main(["analyze", str(record), "--model", str(reference), "--policy-optimism", "1"]) == 2
    assert "has none" in capsys.readouterr().err
