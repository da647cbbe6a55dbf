"""AlphaGo's RL policy stage: games against the pool, REINFORCE, the run (train.policy_gradient)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from eval import cli
from eval.trained_model import load_trained_model
from train import model as model_lib
from train.learner import LearnerConfig, create_train_state
from train.loop import apply_overrides
from train.policy_gradient import (
    Game,
    advantages,
    default_pg_config,
    make_play,
    make_update,
    train_pg,
)

SPEC = model_lib.ModelSpec("alphago_tiny")


def _variables(seed: int, size: int = 5):
    variables = model_lib.init_variables(SPEC, jax.random.PRNGKey(seed), size)
    noisy = lambda x, k: x + 0.3 * jax.random.normal(k, x.shape)
    leaves, tree = jax.tree.flatten(variables)
    keys = jax.random.split(jax.random.PRNGKey(100 + seed), len(leaves))
    return jax.tree.unflatten(tree, [noisy(x, k) for x, k in zip(leaves, keys, strict=True)])


def test_games_are_played_out_and_the_learners_moves_packed():
    game = Game(size=5, komi=0.5, rules="tromp-taylor", max_moves=50, games=6, temperature=1.0)
    play = make_play(SPEC, game)
    moves, results = jax.device_get(play(_variables(0), _variables(1), jax.random.PRNGKey(2)))
    length = np.asarray(results["length"])
    assert np.all((length >= 2) & (length <= 50))
    assert set(np.unique(results["z"])) <= {-1.0, 0.0, 1.0}
    # The learner has Black in games 0-2 (moves 1, 3, ...) and White in 3-5.
    black = np.arange(6) < 3
    want = np.where(black, (length + 1) // 2, length // 2)
    valid = np.asarray(moves["valid"])
    assert valid.sum() == want.sum() and not valid[want.sum() :].any()
    games = np.asarray(moves["game"])[valid]
    np.testing.assert_array_equal(np.bincount(games, minlength=6), want)
    actions = np.asarray(moves["action"])[valid]
    assert np.all(np.asarray(moves["allowed"])[valid][np.arange(actions.size), actions])
    planes = moves["inputs"][0][valid]
    assert planes.dtype == np.uint8 and planes.shape[1:] == (5, 5, 49)
    # Colour plane: Black to move exactly in the learner-as-Black games.
    np.testing.assert_array_equal(planes[:, 0, 0, 48] == 1, black[games])
    # Results are the learner's: with a komi of 100 White wins every game.
    white_wins = dataclasses.replace(game, komi=100.0)
    _, results = make_play(SPEC, white_wins)(_variables(0), _variables(1), jax.random.PRNGKey(2))
    np.testing.assert_array_equal(results["z"], np.where(black, -1.0, 1.0))


def test_advantages_are_the_results_less_the_baseline():
    moves = {
        "game": jnp.array([0, 1, 1, 0]),
        "value": jnp.array([0.5, -0.25, 0.0, 0.0]),
        "valid": jnp.array([True, True, True, False]),
    }
    z = jnp.array([1.0, -1.0])
    np.testing.assert_allclose(advantages(moves, z, "none"), [1.0, -1.0, -1.0, 0.0])
    np.testing.assert_allclose(advantages(moves, z, "value"), [0.5, -0.75, -1.0, 0.0])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_reinforce_raises_a_rewarded_move_and_lowers_a_punished_one(sign):
    """One SGD step on one position: log p(action) goes up with advantage +1 and down
    with -1; padding and moves that were not allowed play no part."""
    config = LearnerConfig(optimizer="sgd", lr_boundaries=(), lr_values=(0.05,), momentum=0.0, l2=0)
    state = create_train_state(SPEC, config, jax.random.PRNGKey(0), 5)
    state = state.replace(params=_variables(3)["params"])
    game = Game(size=5, komi=0.5, rules="tromp-taylor", max_moves=10, games=2, temperature=1.0)
    moves, _ = make_play(SPEC, game)(_variables(3), _variables(3), jax.random.PRNGKey(4))
    chunk = moves["valid"].shape[0]
    one = jnp.arange(chunk) == 0  # the learner's first move only
    moves = {**moves, "valid": one}
    module = model_lib.build(SPEC)

    def log_p(params):
        inputs = (moves["inputs"][0][:1].astype(jnp.float32),)
        out = model_lib.forward(SPEC, module, {"params": params, "batch_stats": {}}, inputs, False)
        logits = jnp.where(moves["allowed"][:1], out["policy_logits"], -jnp.inf)
        return jax.nn.log_softmax(logits)[0, moves["action"][0]]

    before = log_p(state.params)
    update = make_update(SPEC, config, chunk, games=1)
    state, metrics = update(state, moves, jnp.where(one, sign, 5.0))
    after = log_p(state.params)
    assert float(metrics["loss"]) == pytest.approx(-sign * float(before), rel=1e-4)
    assert (after - before) * sign > 0


def _config(workdir_init: str = "", steps: int = 2):
    config = default_pg_config()
    apply_overrides(
        config,
        [
            "--config.board.size=5",
            "--config.board.komi=0.5",
            "--config.board.max_moves=30",
            "--config.pg.games=4",
            "--config.pg.pool_every=1",
            "--config.pg.chunk=32",
            "--config.pg.baseline=value",
            f"--config.train.total_steps={steps}",
            "--config.train.checkpoint_every=1",
            "--config.train.eval_every=2",
            "--config.train.eval_games=4",
            "--config.train.progress=false",
            f"--config.init.workdir={workdir_init}",
        ],
    )
    return config


@pytest.mark.slow
def test_run_starts_from_a_run_resumes_and_plays_through_the_engine(tmp_path):
    first = train_pg(_config(steps=2), tmp_path / "a")
    assert first["step"] == 2 and first["resumed_from"] is None and first["pool"] == 3
    e = first["eval"]
    assert e["games"] == 4 and 0.0 <= e["win_rate"] <= 1.0 and e["ci95"][0] <= e["win_rate"]
    assert (tmp_path / "a" / "learning_curve.png").exists()
    assert (tmp_path / "a" / "eval.json").exists()
    again = train_pg(_config(steps=3), tmp_path / "a")
    assert again["resumed_from"] == 2 and again["step"] == 3 and again["pool"] == 4

    # A run that starts from the first one starts from its weights.
    started = train_pg(_config(str(tmp_path / "a"), steps=1), tmp_path / "b")
    assert started["step"] == 1
    start = load_trained_model(tmp_path / "a")
    model = load_trained_model(tmp_path / "b")
    assert model.version == "alphago" and model.board_sizes == (5,)
    distance = lambda x, y: float(np.max(np.abs(x - y)))
    moved = jax.tree.map(distance, start.variables, model.variables)
    assert 0 < max(jax.tree.leaves(moved)) < 1.0  # one small step away

    wrong = _config(str(tmp_path / "a"), steps=1)
    wrong.model.preset = "alphago_tiny_raw"
    with pytest.raises(ValueError, match="is a 'alphago_tiny' net on 5x5"):
        train_pg(wrong, tmp_path / "c")
    bad = _config(steps=1)
    bad.pg.baseline = "critic"
    with pytest.raises(ValueError, match="pg.baseline='critic': must be one of"):
        train_pg(bad, tmp_path / "d")


def test_command_line_runs_and_names_bad_input(capsys, tmp_path):
    config = str(Path(__file__).resolve().parents[1] / "configs" / "pg_alphago_go9.py")
    small = [
        "--config.board.size=5",
        "--config.pg.games=2",
        "--config.train.total_steps=1",
        "--config.train.eval_games=2",
        "--config.train.progress=false",
    ]
    argv = ["train-pg", "--config", config, "--workdir", str(tmp_path / "run"), *small]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "against the starting policy:" in err and "stopped at iteration 1" in err
    fresh = [*argv[:4], str(tmp_path / "other"), *argv[5:]]
    assert cli.main([*fresh, "--init", str(tmp_path / "nothing")]) == 2
    assert "no checkpoints" in capsys.readouterr().err
    assert cli.main([*argv, "--config.pg.baseline=critic"]) == 2
    assert "pg.baseline='critic': must be one of" in capsys.readouterr().err
