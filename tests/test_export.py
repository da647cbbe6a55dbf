"""``gojax export``: a training run's net written as a KataGo model file and read back."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import jax
import numpy as np
import pytest
from test_train_loop import tiny_config

import gojax
from eval.cli import main
from eval.trained_model import load_trained_model
from gojax.katago_model import load_model
from train import export
from train.checkpoint import RunVariables
from train.loop import apply_overrides, train
from train.model import ModelSpec, encode, forward


def _trained(workdir, *overrides: str) -> str:
    """Three learner steps of ``tiny_config``'s 5x5 run with ``overrides``, no evaluation."""
    config = tiny_config()
    apply_overrides(config, [*overrides, "--config.eval.num_games=0"])
    train(config, workdir)
    return str(workdir)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> str:
    """A 5x5 KataGo ``tiny`` net with the opponent-reply output."""
    return _trained(
        tmp_path_factory.mktemp("run"),
        "--config.model.preset=tiny",
        "--config.model.opponent_policy=true",
    )


@pytest.fixture(scope="module")
def nbt_run_dir(tmp_path_factory) -> str:
    """A 5x5 nested-bottleneck net with Mish (KataGo's current kind)."""
    return _trained(
        tmp_path_factory.mktemp("nbt"),
        "--config.model.preset=tiny_nbt",
        "--config.model.activation=mish",
    )


def states() -> gojax.GoState:
    positions = [gojax.new_game(5, komi=0.5)]
    for action in (12, 7, 13, 8, 25):
        positions.append(gojax.play(positions[-1], action))
    return jax.tree.map(lambda *x: np.stack(x), *positions)


def test_the_run_trained_the_reply_head_and_its_checkpoint_plays(run_dir):
    """(The opponent-reply output end to end; tests/test_opponent_policy.py has the parts.)"""
    record = json.loads((Path(run_dir) / "metrics.jsonl").read_text().splitlines()[0])
    assert record["learner.opponent_policy_loss"] > 0
    model = load_trained_model(run_dir)
    assert model.opponent_policy
    out = model.module().apply(model.variables, *encode(ModelSpec("tiny"), states()))
    assert out["opponent_policy_logits"].shape == (6, 5 * 5 + 1)


def test_the_file_is_the_checkpoints_net(run_dir, tmp_path, capsys):
    out = tmp_path / "net.bin.gz"
    assert main(["export", run_dir, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "KataGo model version 8" in printed and "step 3" in printed
    model = load_model(out)
    assert model.version == 8 and model.config.policy_outputs == 1
    assert model.name == f"{Path(run_dir).name}-s3"
    trained = load_trained_model(run_dir)
    assert trained.opponent_policy
    inputs = encode(ModelSpec("tiny"), states())
    mine = forward(
        ModelSpec("tiny", opponent_policy=True), trained.module(), trained.variables, inputs, False
    )
    file = forward(ModelSpec("tiny"), model.module(), model.variables, inputs, False)
    for key in ("policy_logits", "value", "ownership", "score_lead"):
        np.testing.assert_allclose(file[key], mine[key], rtol=1e-4, atol=1e-4, err_msg=key)
    # KataGo's scoreMean carries the trained score prediction (gojax trains the lead channel).
    sv3 = model.params["value"]["sv3"]
    np.testing.assert_array_equal(sv3["kernel"][:, 0], sv3["kernel"][:, 2])
    np.testing.assert_array_equal(sv3["bias"][0], sv3["bias"][2])
    # The engine reads the checkpoint so too (the run itself left channel 0 as initialised).
    raw = trained.module().apply(trained.variables, *inputs)
    np.testing.assert_allclose(raw["score"][:, 0], raw["score"][:, 2], rtol=1e-6)
    from train.checkpoint import restore_variables

    kept = restore_variables(run_dir, None).variables["params"]["value"]["sv3"]["kernel"]
    assert not np.allclose(kept[:, 0], kept[:, 2])


def test_text_format_by_suffix_and_a_chosen_step_and_name(run_dir, tmp_path):
    out = tmp_path / "net.txt.gz"
    result = export.export_run(run_dir, out, step=2, name="mine")
    assert result["step"] == 2 and result["name"] == "mine"
    text = gzip.decompress(out.read_bytes()).decode("ascii")
    assert text.startswith("mine\n8\n22\n19\n")
    assert load_model(out).name == "mine"


def test_bad_requests_are_one_line_errors_and_leave_no_file(run_dir, tmp_path, capsys):
    cases = [
        (["--out", str(tmp_path / "net.model")], "model file names end in .bin.gz"),
        (["--out", str(tmp_path / "a.bin.gz"), "--step", "7"], "no checkpoint at step 7"),
        (["--out", str(tmp_path / "b.bin.gz"), "--name", "two words"], "one non-empty token"),
    ]
    for args, message in cases:
        assert main(["export", run_dir, *args]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert main(["export", str(tmp_path / "none"), "--out", str(tmp_path / "c.bin.gz")]) == 2
    assert "no checkpoints" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_alphago_zero_nets_and_a_file_that_does_not_match_are_refused(
    run_dir, tmp_path, monkeypatch
):
    import gojax.katago_model
    import train.checkpoint

    real = train.checkpoint.restore_variables(run_dir)
    agz = RunVariables(
        step=1, config={**real.config, "model": {"preset": "agz_tiny"}}, variables={}
    )
    monkeypatch.setattr(train.checkpoint, "restore_variables", lambda *args: agz)
    with pytest.raises(ValueError, match="agz_tiny is an AlphaGo Zero net"):
        export.export_run(run_dir, tmp_path / "agz.bin.gz")
    monkeypatch.undo()

    # A file whose numbers are not the checkpoint's (a value bias shifted on the way) is
    # an error, and neither the file nor its staging folder stays behind.
    save_model = gojax.katago_model.save_model

    def save_shifted(path, config, variables, **kwargs):
        shifted = jax.tree.map(np.array, variables)
        shifted["params"]["value"]["v3"]["bias"][0] += 1.0
        save_model(path, config, shifted, **kwargs)

    monkeypatch.setattr(gojax.katago_model, "save_model", save_shifted)
    with pytest.raises(ValueError, match="differs from the checkpoint's: {'value'"):
        export.export_run(run_dir, tmp_path / "broken.bin.gz")
    assert list(tmp_path.iterdir()) == []


def test_a_mish_nested_bottleneck_net_is_written_as_version_11(nbt_run_dir, tmp_path, capsys):
    trained = load_trained_model(nbt_run_dir)
    assert trained.activation == "mish"
    assert trained.module().config.activation == "mish"
    out = tmp_path / "nbt.bin.gz"
    assert main(["export", nbt_run_dir, "--out", str(out)]) == 0
    assert "KataGo model version 11" in capsys.readouterr().out
    model = load_model(out)
    assert model.version == 11
    config = model.config
    assert config.activation == "mish" and config.score_channels == 6
    assert config.blocks == trained.module().config.blocks
    assert all(block[0] == "nested" for block in config.blocks)
    inputs = encode(ModelSpec("tiny_nbt"), states())
    spec = ModelSpec("tiny_nbt", activation="mish")
    mine = forward(spec, trained.module(), trained.variables, inputs, False)
    file = forward(spec, model.module(), model.variables, inputs, False)
    for key in ("policy_logits", "value", "ownership", "score_lead"):
        np.testing.assert_allclose(file[key], mine[key], rtol=1e-4, atol=1e-4, err_msg=key)
    # The short-term error outputs version 11 adds are not trained: zero weights.
    sv3 = model.params["value"]["sv3"]
    assert sv3["kernel"].shape[-1] == 6
    assert not np.any(sv3["kernel"][:, 4:]) and not np.any(sv3["bias"][4:])
    # The same net read as ReLU gives other numbers: the activation was trained and written.
    relu = forward(
        ModelSpec("tiny_nbt"),
        trained.module().clone(
            config=dataclasses.replace(trained.module().config, activation="relu")
        ),
        trained.variables,
        inputs,
        False,
    )
    assert not np.allclose(relu["policy_logits"], mine["policy_logits"], atol=1e-3)


def test_activation_is_part_of_the_model_spec_and_of_resuming(nbt_run_dir):
    with pytest.raises(ValueError, match="activation needs a KataGo-architecture preset"):
        ModelSpec("agz_tiny", activation="mish")
    with pytest.raises(ValueError, match="activation must be one of"):
        ModelSpec("tiny", activation="gelu")
    config = tiny_config()
    overrides = ["--config.model.preset=tiny_nbt", "--config.eval.num_games=0"]
    apply_overrides(config, [*overrides, "--config.train.total_steps=6"])
    with pytest.raises(ValueError, match="model.activation: 'mish' -> ''"):
        train(config, nbt_run_dir)
