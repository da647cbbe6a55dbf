"""A run's config checked before anything runs; a diverging run never saves its NaNs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_train_loop import TINY, tiny_config

import train.loop as loop
from gojax.cli import main
from train.checkpoint import Checkpointer
from train.config_checks import AT_LEAST_ONE, AT_LEAST_ZERO, FRACTIONS, check_run_config
from train.learner import first_non_finite


@pytest.mark.parametrize(
    "override, key",
    [
        ("--config.train.keep_checkpoints=0", "train.keep_checkpoints"),
        ("--config.train.updates_per_iteration=0", "train.updates_per_iteration"),
        ("--config.board.size=-1", "board.size"),
        ("--config.board.size=100", "board.size"),
        ("--config.learner.batch_size=0", "learner.batch_size"),
        ("--config.learner.learning_rate=nan", "learner.learning_rate"),
        ("--config.selfplay.dirichlet_fraction=1.5", "selfplay.dirichlet_fraction"),
        ("--config.replay.min_size=999999", "replay.min_size"),
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


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(AT_LEAST_ONE + AT_LEAST_ZERO + FRACTIONS), data=st.data())
def test_every_out_of_range_value_is_refused_naming_its_key(key, data):
    config = tiny_config()
    group, leaf = key.split(".")
    if isinstance(config[group][leaf], int):  # the config keeps each key's type
        value = data.draw(st.integers(max_value=0 if key in AT_LEAST_ONE else -1))
    else:
        bad = st.floats(allow_nan=True, allow_infinity=True)
        value = data.draw(bad.filter(lambda x: not 0 <= x <= (1 if key in FRACTIONS else 1e308)))
    config[group][leaf] = value
    with pytest.raises(ValueError, match=rf"--config\.{key}="):
        check_run_config(config)


def test_every_shipped_training_config_passes_the_checks():
    for name in ("go9_tiny", "go9", "go9_strong", "katago_aux_go9", "go19_b10c128"):
        check_run_config(loop.load_config(f"configs/{name}.py"))


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
