"""Our own checkpoints in the engine: AlphaGo Zero evaluation, sizes, GTP play."""

from __future__ import annotations

import argparse
import dataclasses
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_gtp import ask, gtp_flags, run
from test_train_loop import tiny_config

import gojax
from eval.gtp import GTPServer, make_engine
from eval.trained_model import TrainedModel, _learned_ownership, load_trained_model
from gojax.evaluate import AGZ, evaluate
from train.loop import train
from train.model import ModelSpec, build, encode, forward


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> str:
    """A two-step 5x5 training run of an AlphaGo Zero net."""
    workdir = tmp_path_factory.mktemp("run")
    config = tiny_config()  # 5x5, agz_tiny
    config.eval.num_games = 0
    config.train.total_steps = 2
    train(config, workdir)
    return str(workdir)


def positions(n: int = 4) -> gojax.GoState:
    states = [gojax.new_game(5, komi=0.5)]
    for action in (12, 7, 25, 13, 2):
        states.append(gojax.play(states[-1], action))
    return jax.tree.map(lambda *x: jnp.stack(x), *states[:n])


def test_loads_the_newest_checkpoint_as_an_agz_model(run_dir):
    model = load_trained_model(run_dir)
    assert model.step == 2 and model.version == AGZ and model.board_sizes == (5,)
    assert model.name.endswith("@2")
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(model.variables))
    with pytest.raises(ValueError, match="no checkpoint at step 7"):
        load_trained_model(run_dir, 7)


@pytest.mark.slow
def test_agz_evaluation_is_the_nets_own_output(run_dir):
    model = load_trained_model(run_dir)
    states = positions()
    out = evaluate(model.module(), model.variables, states, version=AGZ, symmetry=0)
    spec = ModelSpec(model.preset)
    direct = forward(spec, build(spec), model.variables, encode(spec, states), train=False)
    legal = jax.vmap(gojax.legal_moves)(states)
    expected = jax.nn.softmax(jnp.where(legal, direct["policy_logits"], -jnp.inf), axis=-1)
    np.testing.assert_allclose(out["policy"], expected, atol=1e-6)
    np.testing.assert_allclose(out["value"], direct["value"], atol=1e-6)
    # White's win probability from the mover's value: Black moves first.
    white_value = np.where(np.asarray(states.to_play) == 1, -out["value"], out["value"])
    np.testing.assert_allclose(out["white_win"], (1 + white_value) / 2, atol=1e-6)
    assert np.all(np.asarray(out["white_ownership"]) == 0)
    average = evaluate(model.module(), model.variables, states, version=AGZ, symmetry="average")
    each = [
        evaluate(model.module(), model.variables, states, version=AGZ, symmetry=k)["value"]
        for k in range(8)
    ]
    np.testing.assert_allclose(average["value"], np.mean(each, axis=0), atol=1e-6)


def _args(run_dir: str, **kwargs) -> argparse.Namespace:
    """``gojax gtp``'s flags as its own parser gives them (every default), then ``kwargs``."""
    flags = gtp_flags("--checkpoint", run_dir, "--visits", "4", "--komi", "0.5", "--lag", "0")
    return argparse.Namespace(**(flags | kwargs))


def test_gtp_plays_a_checkpoints_raw_policy(run_dir):
    engine = make_engine(_args(run_dir, visits=1))
    assert engine.player.name.startswith("policy(")
    # An AGZ net has no ownership to judge dead stones by: the board counts as it stands.
    assert not engine.player.has_ownership
    engine.play(1, 12)
    assert not engine.dead_stones().any() and engine.final_status("alive") == [12]
    server = GTPServer(engine, io.StringIO(), version="test")
    move = ask(server, "genmove b").removeprefix("= ")
    assert move == "pass" or gojax.gtp_to_action(move, 5) is not None
    # kata-raw-nn: the value and the policy, no score or ownership lines for this net.
    raw = ask(server, "kata-raw-nn 0").split("\n")
    assert raw[0] == "= symmetry 0"
    assert [line.split()[0] for line in raw[1:4]] == ["whiteWin", "whiteLoss", "noResult"]
    assert raw[4] == "policy" and len(raw) == 5 + 5 + 1 and raw[-1].startswith("policyPass")
    win, loss = (float(line.split()[1]) for line in raw[1:3])
    assert win + loss == pytest.approx(1.0, abs=2e-6)
    with pytest.raises(ValueError, match="has no optimistic policy"):
        load_trained_model(run_dir).module(policy_optimism=0.2)


@pytest.mark.slow
def test_gtp_plays_a_checkpoint_on_its_own_board_size_only(run_dir):
    engine = make_engine(_args(run_dir))
    assert engine.size == 5
    server = GTPServer(engine, io.StringIO(), version="test")
    assert ask(server, "boardsize 9") == "? unacceptable size"
    replies = run(server, "clear_board\ngenmove b\ngenmove w\n")
    moves = [r.removeprefix("= ") for r in replies[1:]]
    assert all(m == "pass" or gojax.gtp_to_action(m, 5) is not None for m in moves)
    assert ask(server, "showboard").startswith("=")
    with pytest.raises(ValueError, match="plays only on 5x boards"):
        make_engine(_args(run_dir, size=9))
    with pytest.raises(ValueError, match="give one network"):
        make_engine(_args(run_dir, model="x.bin.gz"))


def test_only_self_play_with_an_ownership_loss_learns_ownership():
    net = TrainedModel("n", "tiny", {}, version=8, board_sizes=None, step=1)
    assert net.has_ownership
    assert not dataclasses.replace(net, ownership_trained=False).has_ownership
    assert not dataclasses.replace(net, version=AGZ).has_ownership
    assert _learned_ownership({"selfplay": {}, "learner": {"ownership_weight": 1.5}})
    assert not _learned_ownership({"selfplay": {}, "learner": {"ownership_weight": 0.0}})
    # train-sl's games have no final positions to learn it from.
    assert not _learned_ownership({"data": {}, "learner": {"ownership_weight": 1.0}})


def test_a_checkpoint_plays_over_its_runs_move_set(run_dir):
    """The run self-played over "sensible" moves (default_config's), so its net in GTP never
    considers filling its own eye, unless --moves legal says otherwise."""
    assert load_trained_model(run_dir).moves == "sensible"
    # Black's eye at the corner point a1 (action 20 on 5x5): b1, a2 and b2 are Black's.
    state = gojax.new_game(5, komi=0.5)
    for action in (21, 12, 15, 13, 16, 14):  # B b1, W c3, B a2, W d3, B b2, W e3
        state = gojax.play(state, action)
    assert not gojax.search.MOVE_SETS["sensible"](state)[20] and gojax.legal_moves(state)[20]
    for visits in (1, 4):
        listed = {}
        for moves in (None, "legal"):
            player = make_engine(_args(run_dir, visits=visits, moves=moves)).player
            analyses = [player.evaluate(state)]
            if visits > 1:
                analyses.append(player.analyze(state, visits=visits, key=jax.random.key(1)))
            listed[moves] = {info.action for a in analyses for info in a.moves}
        assert 20 not in listed[None] and 20 in listed["legal"], visits
        assert listed["legal"] - listed[None] <= {20, 25}, visits  # the eye and pass only
