"""Every command's config checked before anything runs; a diverging run never saves its NaNs."""

import math
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import REPO
from test_train_loop import TINY, tiny_config

import train.loop as loop
from eval import sweep
from eval.cli import main
from eval.sweep import SWEEP_RANGES
from train import policy_gradient, rollout_policy, supervised, value_network
from train.checkpoint import Checkpointer
from train.config_checks import (
    LEARNER_RANGES,
    RUN_RANGES,
    KeyRanges,
    check_run_config,
    get_key,
)
from train.learner import first_non_finite
from train.loop import _flatten
from train.policy_gradient import PG_RANGES
from train.rollout_policy import ROLLOUT_RANGES
from train.supervised import SL_RANGES
from train.value_network import VALUE_RANGES


@pytest.mark.parametrize(
    "override, key",
    [
        ("--config.train.keep_checkpoints=0", "train.keep_checkpoints"),
        ("--config.train.updates_per_iteration=0", "train.updates_per_iteration"),
        ("--config.board.size=-1", "board.size"),
        ("--config.board.size=100", "board.size"),
        ("--config.learner.batch_size=0", "learner.batch_size"),
        ("--config.learner.learning_rate=nan", "learner.learning_rate"),
        ("--config.learner.lr_drops=(900, 300)", "learner.lr_drops"),
        ("--config.learner.lr_drop_factor=0.0", "learner.lr_drop_factor"),
        ("--config.selfplay.dirichlet_fraction=1.5", "selfplay.dirichlet_fraction"),
        ("--config.replay.min_size=999999", "replay.min_size"),
        ("--config.selfplay.num_slots=999", "selfplay.num_slots"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2_before_anything_is_written(
    override, key, tmp_path, capsys
):
    workdir = tmp_path / "run"
    args = ["train", "--config", "configs/go9_tiny.py", "--workdir", str(workdir)]
    assert main(args + TINY + [override]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--config.{key}=" in err[0] and "must be" in err[0], err
    assert not workdir.exists()


def test_slots_below_the_games_only_for_whole_games():
    config = tiny_config()
    config.selfplay.num_slots = config.selfplay.num_games // 2
    check_run_config(config)  # whole games (num_steps 0): fine
    config.selfplay.num_steps = 5
    with pytest.raises(ValueError, match=r"^--config\.selfplay\.num_slots=4: .*whole games"):
        check_run_config(config)
    config.selfplay.num_steps = 0
    config.selfplay.num_slots, config.selfplay.num_devices = 2, 4  # 8 games split, 2 slots not
    with pytest.raises(ValueError, match=r"^--config\.selfplay\.num_slots=2: .*num_devices"):
        check_run_config(config)


# Each command: its default config made valid as cheaply as possible, its check, its table.
def _sweep_config():
    config = sweep.default_config()
    config.checkpoints.workdir = "run"
    return config


COMMANDS = {
    "train": (tiny_config, check_run_config, RUN_RANGES, LEARNER_RANGES),
    "train-sl": (supervised.default_sl_config, supervised.check_config, SL_RANGES, LEARNER_RANGES),
    "train-pg": (
        policy_gradient.default_pg_config,
        policy_gradient.check_config,
        PG_RANGES,
        LEARNER_RANGES,
    ),
    "train-value": (
        value_network.default_value_config,
        value_network.check_config,
        VALUE_RANGES,
        LEARNER_RANGES,
    ),
    "train-rollout": (
        rollout_policy.default_rollout_config,
        rollout_policy.check_config,
        ROLLOUT_RANGES,
        KeyRanges(),
    ),
    "sweep": (_sweep_config, sweep.check_config, SWEEP_RANGES, KeyRanges()),
}


def _ranged_keys():
    for command, (_, _, ranges, learner) in COMMANDS.items():
        for table in (ranges, learner):
            for key in table.keys():
                yield command, key, table


RANGED_KEYS = list(_ranged_keys())


def _set(config, key, value):
    *groups, leaf = key.split(".")
    node = config
    for group in groups:
        node = node[group]
    node[leaf] = value


def _out_of_range(data, value, key, table):
    """A value of ``value``'s type (an element of it for a tuple) outside ``key``'s range."""
    if isinstance(value, tuple | list):  # one bad element among good ones
        good = list(value) or [1]
        bad = _out_of_range(data, good[0], key, table)
        return tuple(data.draw(st.permutations(good[1:] + [bad])))
    if isinstance(value, int):
        return data.draw(st.integers(max_value=0 if key in table.at_least_one else -1))
    floats = st.floats(allow_nan=True, allow_infinity=True)
    if key in table.fractions:
        return data.draw(floats.filter(lambda x: not 0 <= x <= 1))
    if key in table.positive:
        return data.draw(floats.filter(lambda x: not 0 < x < math.inf))
    low = 1 if key in table.at_least_one else 0
    return data.draw(floats.filter(lambda x: not low <= x < math.inf))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(RANGED_KEYS), data=st.data())
def test_every_out_of_range_value_is_refused_naming_its_key(case, data):
    command, key, table = case
    make, check, _, _ = COMMANDS[command]
    config = make()
    value = _out_of_range(data, get_key(config, key), key, table)
    _set(config, key, value)  # the config keeps each key's type
    with pytest.raises(ValueError, match=rf"^--config\.{re.escape(key)}=") as error:
        check(config)
    assert "\n" not in str(error.value)


ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.one_of(st.integers(-5, 5), st.floats(-2, 2), st.text(max_size=3)), max_size=3),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(sorted(COMMANDS)), data=st.data())
def test_any_value_of_any_key_passes_or_is_one_line_naming_the_key(command, data):
    """What a config file or an override of a None key can put anywhere: the check passes
    or raises one ValueError (``gojax`` prints it as one line, exit 2), never another
    exception that would be a traceback; a value of another type names its key."""
    make, check, _, _ = COMMANDS[command]
    tree = make().to_dict()
    key = data.draw(st.sampled_from(sorted(_flatten(tree))))
    value = data.draw(ANYTHING)
    _set(tree, key, value)
    config = ml_collections.ConfigDict(tree)  # a fresh ConfigDict takes any type
    try:
        check(config)
    except ValueError as error:
        assert "\n" not in str(error)
        return
    default = get_key(make(), key)
    if default is not None and not isinstance(default, tuple | list):
        assert type(value) is type(default) or (type(default) is float and type(value) is int)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_key_in_a_config_file_is_refused_with_the_nearest_name(command):
    config = COMMANDS[command][0]()
    key = {"sweep": "games.num_game", "train-rollout": "train.total_step"}.get(
        command, "train.total_step"
    )
    _set(config, key, 5)  # ml_collections adds it silently
    with pytest.raises(ValueError, match=rf"unknown config key '{key}' .*did you mean '{key}s'"):
        COMMANDS[command][1](config)
    config = COMMANDS[command][0]()
    config.nonsense = 1
    with pytest.raises(ValueError, match=r"unknown config key 'nonsense' \(known: .*seed"):
        COMMANDS[command][1](config)


# A few invalid values per command, through ``gojax`` itself: exit 2, one line, nothing written.
SHIPPED = {
    "train-sl": "sl_go9",
    "train-pg": "pg_alphago_go9",
    "train-value": "value_alphago_go9",
    "train-rollout": "rollout_alphago_go9",
    "sweep": "sweep_go9_tiny",
}
CLI_CASES = [
    ("train-sl", "data.window=0", "data.window"),
    ("train-sl", "data.min_size=60000", "data.min_size"),
    ("train-sl", "train.keep_checkpoints=0", "train.keep_checkpoints"),
    ("train-sl", "learner.num_devices=3", "learner.batch_size"),  # 128 on 3 devices
    ("train-pg", "pg.games=0", "pg.games"),
    ("train-pg", "pg.temperature=-1", "pg.temperature"),
    ("train-pg", "learner.lr_values=(0.0,)", "learner.lr_values"),
    ("train-value", "data.lam=1.5", "data.lam"),
    ("train-value", "board.size=1", "board.size"),
    ("train-value", "learner.batch_size=0", "learner.batch_size"),
    ("train-rollout", "train.batch_size=0", "train.batch_size"),
    ("train-rollout", "train.learning_rate=inf", "train.learning_rate"),
    ("train-rollout", "train.checkpoint_every=0", "train.checkpoint_every"),
    ("sweep", "games.num_games=0", "games.num_games"),
    ("sweep", "search.simulations=(8, 0)", "search.simulations"),
    ("sweep", "search.c_puct=(1.0, -2.0)", "search.c_puct"),
    ("sweep", "games.resign_threshold=2.0", "games.resign_threshold"),
    ("sweep", "board.komi=inf", "board.komi"),
]


@pytest.mark.parametrize("command, override, key", CLI_CASES)
def test_each_command_refuses_a_bad_value_in_one_line_before_anything_is_written(
    command, override, key, tmp_path, capsys
):
    workdir = tmp_path / "run"
    config = f"configs/{SHIPPED[command]}.py"
    args = [command, "--config", config, "--workdir", str(workdir)]
    assert main([*args, f"--config.{override}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--config.{key}=" in err[0] and "must be" in err[0], err
    assert err[0].startswith(f"gojax {command}: error: ")
    assert not workdir.exists()


def test_a_mistyped_config_file_is_one_line(tmp_path, capsys):
    """A config file that reads a key that is not there, or gives a key a value of
    another type, fails inside get_config(): one line naming the file, not a traceback."""
    for body, message in (
        ("c.train.total_step += 1", "AttributeError"),
        ("c.train.total_steps = 2.5", "TypeError"),
    ):
        path = tmp_path / "mistyped.py"
        path.write_text(
            "from train.supervised import default_sl_config\n\n"
            f"def get_config():\n    c = default_sl_config()\n    {body}\n    return c\n"
        )
        workdir = tmp_path / "run"
        assert main(["train-sl", "--config", str(path), "--workdir", str(workdir)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(path) in err[0] and message in err[0], err


@pytest.mark.parametrize(
    "argv, key",
    [
        (["train-value", "--config", "configs/value_alphago_go9.py", "--config.data.games=0"],
         "data.games"),
        (["sweep", "--config", "configs/sweep_go9_tiny.py", "--config.games.num_devices=-1"],
         "games.num_devices"),
    ],
)  # fmt: skip
def test_the_command_line_refuses_before_starting_anything(argv, key, tmp_path):
    """In a fresh process as a user runs it: exit 2, one line on stderr, no traceback."""
    workdir = tmp_path / "run"
    env = dict(os.environ, GOJAX_CACHE="")
    done = subprocess.run(
        [sys.executable, "-m", "eval.cli", *argv, "--workdir", str(workdir)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--config.{key}=" in lines[0], done.stderr
    assert not workdir.exists()


def test_a_diverging_run_stops_naming_the_step_and_keeps_its_finite_checkpoint(
    tmp_path, monkeypatch, capsys
):
    """The state turns NaN at step 3 of 6 (a learner step that diverges): the save due at
    step 4 is refused, the run stops with one line naming step 3, and the newest
    checkpoint is the finite one of step 2."""
    original = loop._train_step

    def poisoned(spec, config, mesh):
        step_fn = original(spec, config, mesh)

        def step(state, batch):
            state, metrics = step_fn(state, batch)
            if int(state.step) >= 3:
                params = jax.tree.map(lambda x: x * jnp.nan, state.params)
                state = state.replace(params=params)
                metrics = {**metrics, "total_loss": jnp.asarray(jnp.nan)}
            return state, metrics

        return step

    monkeypatch.setattr(loop, "_train_step", poisoned)
    config = tiny_config()
    config.eval.num_games = 0
    config.train.total_steps = 6
    config.train.updates_per_iteration = 3
    config.train.checkpoint_every = 2
    with pytest.raises(FloatingPointError, match=r"non-finite total_loss=nan at step 3"):
        loop.train(config, tmp_path / "run")
    ckpt = Checkpointer(tmp_path / "run" / "checkpoints")
    try:
        assert ckpt.all_steps() == [2]
        template = loop.abstract_train_state(
            loop.model_lib.spec_from_config(config.model), loop.learner_config(config), 5
        )
        restored = ckpt.restore(2, template)
    finally:
        ckpt.close()
    assert first_non_finite((restored.state.params, restored.state.opt_state)) is None
    assert first_non_finite({"w": np.array([1.0, np.inf])}) == "['w']"
