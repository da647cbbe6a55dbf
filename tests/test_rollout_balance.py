"""Simulation balancing: recorded rollouts, the replayed gradient, its sign, the command."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from reference import reference_path

import gojax
from gojax import rollout_policy as rp
from gojax.uct import random_rollout, rollout_moves
from train.rollout_balance import (
    _allowed_logits,
    _apply,
    balance_gradient,
    check_config,
    default_balance_config,
    only_tables,
    record_rollouts,
    replay_log_likelihood_grad,
)

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"
_play = jax.jit(jax.vmap(gojax.play))
_allowed = jax.jit(jax.vmap(rollout_moves))


def _games(count: int, size: int = 5, cap: int = 30):
    state = gojax.new_game(size, komi=0.5, rules="tromp-taylor", max_moves=cap)
    return jax.tree.map(lambda x: jnp.stack([x] * count), state)


def _random_weights(seed: int = 0) -> rp.RolloutWeights:
    keys = jax.random.split(jax.random.key(seed), 4)
    return rp.RolloutWeights(
        *(0.3 * jax.random.normal(k, w.shape) for k, w in zip(keys, rp.zero_weights(), strict=True))
    )


def test_recorded_moves_are_rollout_moves_and_replay_to_the_outcome():
    games = _games(4, size=4, cap=20)
    actions, steps, outcome = record_rollouts(_random_weights(), games, jax.random.key(1))
    steps = int(steps)
    assert 0 < steps <= games.max_moves and actions.shape == (games.max_moves, 4)
    current = games
    for t in range(steps):
        allowed = np.asarray(_allowed(current))
        for g in range(4):
            if not bool(current.terminated[g]):
                assert allowed[g, int(actions[t, g])], (t, g)
            else:
                assert int(actions[t, g]) == 16  # pass once over
        current = _play(current, actions[t])
    assert bool(jnp.all(current.terminated))
    assert np.all(np.asarray(actions[steps:]) == 16)
    # Black moves first: the outcome is the winner from Black's side.
    np.testing.assert_array_equal(np.asarray(jax.vmap(gojax.winner)(current)), outcome)


def test_replayed_gradient_equals_the_gradient_of_the_log_likelihood_move_by_move():
    games = _games(3, size=4, cap=12)
    weights = _random_weights(2)
    actions, steps, _ = record_rollouts(weights, games, jax.random.key(3))
    coefficients = jnp.asarray([1.0, -0.5, 2.0])
    replayed = replay_log_likelihood_grad(weights, games, actions, steps, coefficients)

    @jax.jit
    def one_move(w, current, moves):
        logp = jax.nn.log_softmax(_allowed_logits(w, current), axis=-1)
        chosen = logp[jnp.arange(3), moves]
        return jnp.sum(jnp.where(current.terminated, 0.0, coefficients * chosen))

    grad_one = jax.jit(jax.grad(one_move))
    direct, current = jax.tree.map(jnp.zeros_like, weights), games
    for t in range(int(steps)):  # the sum of the gradients of each move's term
        direct = jax.tree.map(jnp.add, direct, grad_one(weights, current, actions[t]))
        current = _play(current, actions[t])
    for name, a, b in zip(rp.RolloutWeights._fields, replayed, direct, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4, err_msg=name)
        assert float(jnp.max(jnp.abs(b))) > 0.1, name  # every table is reached


@pytest.mark.slow
def test_balancing_moves_the_rollouts_mean_towards_the_target():
    """From the empty 5x5 board (Black to move), a target of +1 or -1 pulls the mean
    rollout outcome up or down: the gradient has the right sign."""
    states = _games(16)
    first = jax.tree.map(lambda x: x[:1], states)
    means = {}
    for target in (1.0, -1.0):
        start = rp.zero_weights()
        weights, optimizer = start, optax.adam(0.3)
        opt_state = optimizer.init(weights)
        for step in range(30):
            grad, value = balance_gradient(
                weights, states, jnp.full(16, target), jax.random.key(step), 8
            )
            assert value.shape == (16,)
            weights, opt_state = _apply(weights, opt_state, grad, start, 0.0, optimizer)
        means[target] = float(random_rollout(first, jax.random.key(99), 512, weights=weights)[0])
    uniform = float(random_rollout(first, jax.random.key(99), 512)[0])
    assert means[1.0] > uniform + 0.05 and means[-1.0] < uniform - 0.2, (means, uniform)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("data.init", "", r"data.init is required \(--init\)"),
        ("data.holdout_games", 0, "data.holdout_games must be at least 1"),
        ("train.rollouts", 0, "train.rollouts must be >= 1"),
        ("train.learning_rate", 0.0, "train.learning_rate must be > 0"),
        ("train.optimizer", "lamb", r"train.optimizer must be one of \('adam', 'sgd'\)"),
        ("train.tables", ("last", "offsets"), "train.tables must name some of"),
        ("train.tables", (), "train.tables must name some of"),
        ("eval.max_positions", 0, "eval.max_positions must be >= 1"),
    ],
)
def test_bad_configs_are_named(key, value, message):
    config = default_balance_config()
    config.data.sgf_dir, config.data.init, config.data.model = "games", "p.npz", "m.bin.gz"
    group, name = key.split(".")
    config[group][name] = value
    with pytest.raises(ValueError, match=message):
        check_config(config)


def test_unknown_config_keys_are_named():
    config = default_balance_config()
    config.train.steps = 3  # a typo
    with pytest.raises(ValueError, match=r"unknown balancing config keys \['train.steps'\]"):
        check_config(config)


@pytest.mark.slow
def test_balance_rollout_command_writes_a_policy_and_resumes(tmp_path, capsys):
    from eval import cli

    model = reference_path("katago", MODEL)
    sgf_dir = reference_path("sgf", "katago-9x9")
    start = tmp_path / "start.npz"
    rp.save(start, _random_weights(4))
    config = tmp_path / "balance.py"
    config.write_text(
        "from train.rollout_balance import default_balance_config\n"
        "def get_config():\n"
        "    c = default_balance_config()\n"
        "    c.data.max_games, c.data.holdout_games, c.data.positions_per_game = 10, 3, 1\n"
        "    c.train.positions, c.train.rollouts, c.train.eval_every = 4, 2, 2\n"
        "    c.eval.rollouts, c.eval.max_positions = 2, 8\n"
        "    c.train.progress = False\n"
        "    return c\n"
    )
    workdir = tmp_path / "run"
    args = ["balance-rollout", "--config", str(config), "--workdir", str(workdir)]
    args += ["--init", str(start), "--model", str(model), "--sgf-dir", str(sgf_dir)]
    assert cli.main(args + ["--config.train.total_steps=2"]) == 0
    err = capsys.readouterr().err
    assert "held-out MSE of 2 rollouts against the value net" in err
    summary = json.loads((workdir / "eval.json").read_text())
    assert summary["step"] == 2 and summary["games"] == {"holdout": 3, "train": 7}
    assert summary["holdout"]["balanced"]["positions"] == 8
    assert 0.0 <= summary["holdout"]["start"]["mse_target"] <= 4.0
    balanced = rp.load(workdir / "rollout_policy.npz")
    assert not np.array_equal(balanced.pattern, rp.load(start).pattern)
    assert rp.metadata(workdir / "rollout_policy.npz")["balanced_from"] == str(start)
    # Two more steps continue from the checkpoint; the start is evaluated only once.
    assert cli.main(args + ["--config.train.total_steps=4"]) == 0
    records = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "train.squared_error" in r] == [1, 2, 3, 4]
    assert [
        r["step"] for r in records if "weight_shift" not in r and "holdout.mse_target" in r
    ] == [0]
    # Another start policy is another run: refused, naming the key.
    capsys.readouterr()
    other = tmp_path / "other.npz"
    rp.save(other, rp.zero_weights())
    code = cli.main(args[:-6] + ["--init", str(other), "--model", str(model), "--sgf-dir",
                                 str(sgf_dir), "--config.train.total_steps=6"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "data.init" in err and "Traceback" not in err


def test_apply_adds_the_pull_towards_the_start():
    start = rp.zero_weights()
    moved = jax.tree.map(lambda x: x + 1.0, start)
    optimizer = optax.sgd(0.25)
    zero = jax.tree.map(jnp.zeros_like, start)
    after, _ = _apply(moved, optimizer.init(moved), zero, start, 1.0, optimizer)
    # gradient 2 * l2 * (w - start) = 2: one SGD step of 0.25 takes w from 1 to 0.5
    np.testing.assert_allclose(after.last, np.full(start.last.shape, 0.5))


def test_only_the_named_tables_are_balanced():
    grad = jax.tree.map(jnp.ones_like, rp.zero_weights())
    kept = only_tables(grad, ("last", "own_last"))
    assert float(jnp.sum(kept.pattern)) == 0 and float(jnp.sum(kept.response)) == 0
    np.testing.assert_array_equal(kept.last, grad.last)
    np.testing.assert_array_equal(kept.own_last, grad.own_last)
