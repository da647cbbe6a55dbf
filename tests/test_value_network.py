"""AlphaGo's value-network stage: one position per game, value-only regression, the run."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gojax
from eval import cli
from eval.trained_model import load_trained_model
from train import model as model_lib
from train.checkpoint import Checkpointer
from train.learner import LearnerConfig, create_train_state
from train.loop import config_to_json, learner_config
from train.value_network import (
    Sampling,
    default_value_config,
    generate_split,
    make_generate,
    make_value_update,
    train_value,
)

SPEC = model_lib.ModelSpec("alphago_tiny")
SAMPLING = Sampling(
    size=5, komi=0.5, rules="tromp-taylor", max_moves=50, games=64, max_random_move=6, temperature=1
)


def _variables(seed: int, *, always_pass: bool = False):
    variables = model_lib.init_variables(SPEC, jax.random.PRNGKey(seed), 5)
    leaves, tree = jax.tree.flatten(variables)
    keys = jax.random.split(jax.random.PRNGKey(100 + seed), len(leaves))
    noisy = [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    variables = jax.tree.unflatten(tree, noisy)
    if always_pass:  # the pass logit far above every point's
        variables["params"]["policy_pass"]["bias"] = jnp.full((1,), 1e4)
    return variables


def _generate(sl, rl, sampling=SAMPLING, seed=0):
    out = make_generate(SPEC, sampling)(sl, rl, jax.random.PRNGKey(seed))
    return jax.device_get(out)


@pytest.mark.slow
def test_each_game_gives_the_position_after_its_random_move():
    out = _generate(_variables(0), _variables(1))
    valid, u, length = out["valid"], out["u"], out["length"]
    assert np.all((u >= 1) & (u <= 6))
    # A game gives a position exactly when it lasted beyond move U.
    np.testing.assert_array_equal(valid, length > u)
    assert valid.sum() > 10
    states = out["states"]
    np.testing.assert_array_equal(states.move_number[valid], u[valid])
    # The planes are the net's input in that position.
    kept = jax.tree.map(lambda x: x[valid], states)
    (planes,) = model_lib.encode(SPEC, kept)
    np.testing.assert_array_equal(out["planes"][valid], np.asarray(planes).astype(np.uint8))
    assert out["planes"].dtype == np.uint8 and out["planes"].shape[1:] == (5, 5, 49)
    # The result is the game's, for the player to move: with komi 100 White wins them all.
    white = make_generate(SPEC, dataclasses.replace(SAMPLING, komi=100.0))
    out = jax.device_get(white(_variables(0), _variables(1), jax.random.PRNGKey(0)))
    ok = out["valid"]
    black_to_move = out["planes"][ok][:, 0, 0, 48] == 1
    np.testing.assert_array_equal(out["z"][ok], np.where(black_to_move, -1.0, 1.0))


@pytest.mark.slow
def test_sl_plays_before_the_random_move_and_rl_after_it():
    # SL passes, RL plays: a game survives SL's two passes only if U <= 2, and then the
    # random move is the only stone of its colour on the board.
    out = _generate(_variables(0, always_pass=True), _variables(1))
    valid, u = out["valid"], out["u"]
    assert valid.sum() > 10 and np.all(u[valid] <= 2)
    board = out["states"].board[valid].reshape(-1, 25)
    stones = lambda colour: np.sum(board == colour, axis=1)
    first = u[valid] == 1  # the random move was Black's first
    np.testing.assert_array_equal(stones(gojax.BLACK)[first], 1)
    np.testing.assert_array_equal(stones(gojax.WHITE)[first], 0)
    np.testing.assert_array_equal(stones(gojax.BLACK)[~first], 0)  # Black passed, then
    np.testing.assert_array_equal(stones(gojax.WHITE)[~first], 1)
    # SL plays, RL passes: every game ends with RL's two passes right after move U.
    out = _generate(_variables(0), _variables(1, always_pass=True))
    valid = out["valid"]
    assert valid.sum() > 10
    np.testing.assert_array_equal(out["length"][valid], out["u"][valid] + 2)


def test_the_update_fits_the_value_network_and_leaves_the_policy_exactly():
    config = LearnerConfig(optimizer="adamw", learning_rate=3e-3, warmup_steps=0, total_steps=50)
    config = dataclasses.replace(config, weight_decay=0.1, l2=1e-3)
    state = create_train_state(SPEC, config, jax.random.PRNGKey(0), 5)
    before = jax.device_get(state.params)
    out = _generate(_variables(0), _variables(1))
    planes = out["planes"][out["valid"]][:32]
    z = np.where(planes[:, 0, 0, 48] == 1, 1.0, -1.0).astype(np.float32)  # Black to move wins
    assert len(planes) >= 16 and 0 < np.sum(z > 0) < len(z)
    update = make_value_update(SPEC, config)
    losses = []
    for step in range(40):
        symmetries = np.full(len(z), step % 8, np.int32)
        state, metrics = update(state, planes, z, symmetries)
        losses.append(float(metrics["mse"]))
    assert losses[-1] < 0.5 * losses[0]
    after = jax.device_get(state.params)
    for name in before:
        same = jax.tree.map(np.array_equal, before[name], after[name])
        if name.startswith("value"):
            assert not all(jax.tree.leaves(same)), name
        else:
            assert all(jax.tree.leaves(same)), name


def test_data_parts_are_kept_and_only_the_missing_ones_played(tmp_path):
    calls = []

    def make_batch(index):
        calls.append(index)
        return {"z": np.full(3, index, np.float32), "u": np.arange(3, dtype=np.int32)}

    first = generate_split(tmp_path, "train", 5, make_batch, progress=False)
    assert calls == [0, 1] and first["z"].tolist() == [0, 0, 0, 1, 1]
    more = generate_split(tmp_path, "train", 8, make_batch, progress=False)
    assert calls == [0, 1, 2] and more["z"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    (tmp_path / "train-00001.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"train-00001.npz: not a readable data part"):
        generate_split(tmp_path, "train", 8, make_batch, progress=False)


def test_a_batch_without_positions_is_an_error_not_a_hang(tmp_path):
    def make_batch(index):
        return {"z": np.zeros(0, np.float32)}

    with pytest.raises(ValueError, match="train batch 0: no game lasted beyond its random move"):
        generate_split(tmp_path, "train", 5, make_batch, progress=False)
    assert not list(tmp_path.glob("*.npz"))


def _save_run(path: Path, seed: int, preset: str = "alphago_tiny") -> None:
    """A checkpoint of random weights, as a train-sl run of ``preset`` on 5x5 would leave."""
    config = default_value_config()
    config.board.size = 5
    config.model.preset = preset
    spec = model_lib.spec_from_config(config.model)
    state = create_train_state(spec, learner_config(config), jax.random.PRNGKey(seed), 5)
    ckpt = Checkpointer(path / "checkpoints")
    ckpt.save(1, state, config=config_to_json(config), force=True)
    ckpt.close()


def _config(init: Path | None, steps: int):
    c = default_value_config()
    c.board.size = 5
    c.board.max_moves = 40
    c.init.workdir = str(init) if init else ""
    c.data.positions = 96
    c.data.holdout = 32
    c.data.games = 48
    c.data.rollouts = 2
    c.data.max_random_move = 8
    c.learner.batch_size = 16
    c.train.total_steps = steps
    c.train.eval_every = 2
    c.train.checkpoint_every = 2
    c.train.progress = False
    return c


def test_run_generates_trains_resumes_and_keeps_the_init_policy(tmp_path):
    _save_run(tmp_path / "sl", 0)
    _save_run(tmp_path / "rl", 1)
    config = _config(tmp_path / "sl", steps=2)
    config.players.rl_workdir = str(tmp_path / "rl")
    first = train_value(config, tmp_path / "v")
    assert first["step"] == 2 and first["positions"] == 96 and first["holdout"] == 32
    e = first["eval"]
    assert set(e["mse"]) == {"value", "start", "zero", "rollouts", "mix"}
    holdout = np.concatenate(
        [np.load(p)["z"] for p in sorted((tmp_path / "v" / "data").glob("holdout-*.npz"))]
    )[:32]
    assert e["mse"]["zero"] == pytest.approx(np.mean(holdout**2))
    assert sum(e["by_move"]["count"]) == 32 and e["step"] == 2
    for name in ("eval.json", "value_by_move.png", "learning_curve.png"):
        assert (tmp_path / "v" / name).exists(), name
    parts = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "v" / "data").iterdir()}

    config.train.total_steps = 4
    again = train_value(config, tmp_path / "v")
    assert again["resumed_from"] == 2 and again["step"] == 4
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "v" / "data").iterdir()} == parts
    saved = json.loads((tmp_path / "v" / "eval.json").read_text())
    assert saved["step"] == 4 and saved["mse"] == again["eval"]["mse"]

    # The result is the SL net's policy with a new value net, playable as any run.
    start, model = load_trained_model(tmp_path / "sl"), load_trained_model(tmp_path / "v")
    assert model.version == "alphago" and model.board_sizes == (5,)
    for name, params in start.variables["params"].items():
        same = jax.tree.leaves(
            jax.tree.map(np.array_equal, params, model.variables["params"][name])
        )
        assert all(same) != name.startswith("value"), name

    # Other data settings: refused for the checkpoints, and (without them) for the data.
    other = _config(tmp_path / "sl", steps=4)
    other.players.rl_workdir = str(tmp_path / "rl")
    other.data.max_random_move = 9
    with pytest.raises(ValueError, match="cannot resume step 4 with a different config"):
        train_value(other, tmp_path / "v")
    shutil.rmtree(tmp_path / "v" / "checkpoints")
    with pytest.raises(ValueError, match="generated with other data settings"):
        train_value(other, tmp_path / "v")


def test_bad_runs_and_presets_are_named(tmp_path):
    _save_run(tmp_path / "sl", 0)
    _save_run(tmp_path / "agz", 0, preset="agz_tiny")
    wrong = _config(tmp_path / "sl", steps=1)
    wrong.players.rl_workdir = str(tmp_path / "agz")
    with pytest.raises(ValueError, match="RL policy run .* is a 'agz_tiny' net on 5x5"):
        train_value(wrong, tmp_path / "a")
    agz = _config(tmp_path / "agz", steps=1)
    agz.model.preset = "agz_tiny"
    with pytest.raises(ValueError, match="not an AlphaGoNet preset"):
        train_value(agz, tmp_path / "b")
    with pytest.raises(ValueError, match="init.workdir is required"):
        train_value(_config(None, steps=1), tmp_path / "c")


def test_command_line_runs_and_names_bad_input(capsys, tmp_path):
    _save_run(tmp_path / "sl", 0)
    config = str(Path(__file__).resolve().parents[1] / "configs" / "value_alphago_go9.py")
    small = [
        "--config.board.size=5",
        "--config.board.max_moves=30",
        "--config.data.positions=32",
        "--config.data.holdout=16",
        "--config.data.games=32",
        "--config.data.rollouts=1",
        "--config.learner.batch_size=8",
        "--config.train.total_steps=1",
        "--config.train.progress=false",
    ]
    argv = ["train-value", "--config", config, "--workdir", str(tmp_path / "v"), *small]
    assert cli.main([*argv, "--init", str(tmp_path / "sl")]) == 0
    err = capsys.readouterr().err
    assert "held-out MSE on 16 positions: value net" in err and "stopped at step 1" in err
    assert cli.main([*argv[:4], str(tmp_path / "w"), *small]) == 2
    assert "init.workdir is required" in capsys.readouterr().err
    assert cli.main([*argv, "--init", str(tmp_path / "sl"), "--config.data.lam=2"]) == 2
    assert "--config.data.lam=2.0: must be a number in [0, 1]" in capsys.readouterr().err
