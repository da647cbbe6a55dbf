"""Continuing a run in a fresh workdir from a replay-free snapshot (train.continuation)."""

import json

import jax
import numpy as np
import pytest
from test_train_loop import tiny_config

from eval.cli import main
from train.checkpoint import Checkpointer
from train.continuation import resolve_checkpoint
from train.learner import abstract_train_state
from train.loop import learner_config, train
from train.model import spec_from_config


def _restore(checkpoints, step, config):
    template = abstract_train_state(
        spec_from_config(config.model), learner_config(config), config.board.size
    )
    ckpt = Checkpointer(checkpoints)
    try:
        return ckpt.restore(step, template)
    finally:
        ckpt.close()


def _leaves_equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb) and len(la) > 10
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_fresh_workdir_continues_with_the_same_state_and_counters(tmp_path):
    config = tiny_config()
    config.eval.num_games = 0
    config.train.total_steps = 6  # two iterations
    config.train.snapshot_every = 3
    first = train(config, tmp_path / "first")
    assert first["step"] == 6
    # Replay-free copies along the way, read as a run's workdir.
    kept = tmp_path / "first" / "snapshots" / "checkpoints"
    assert sorted(p.name for p in kept.iterdir()) == ["3", "6"]
    assert not (kept / "3" / "extra").exists()
    saved = _restore(tmp_path / "first" / "checkpoints", 6, config)
    _leaves_equal(_restore(kept, 6, config).state, saved.state)

    # The replay-free copy: state, config, counters; no replay.
    args = ["snapshot", "--workdir", str(tmp_path / "first"), "--out", str(tmp_path / "snap")]
    assert main(args) == 0
    snap = tmp_path / "snap" / "checkpoints"
    assert resolve_checkpoint(tmp_path / "snap") == (str(snap.resolve()), 6)
    assert not (snap / "6" / "extra").exists() and (snap / "6" / "state").is_dir()
    source = _restore(tmp_path / "first" / "checkpoints", 6, config)
    counters = source.info["counters"]
    assert counters["games"] == 16 and counters["iteration"] == 2
    assert counters["cpu_seconds"] > 0 and counters["wall_seconds"] > 0

    # A fresh workdir from it, stopping where it starts: what it saves is the source's.
    config.train.init_from = str(snap / "6")
    second = train(config, tmp_path / "second")
    assert second["step"] == 6 and second["resumed_from"] is None and second["replay_size"] == 0
    copy = _restore(tmp_path / "second" / "checkpoints", 6, config)
    _leaves_equal(copy.state, source.state)  # params, batch stats, optimiser state, step
    assert copy.state.opt_state is not None
    for k in ("iteration", "games", "positions"):
        assert copy.info["counters"][k] == counters[k], k
    assert copy.info["counters"]["cpu_seconds"] >= counters["cpu_seconds"]
    lineage = json.loads((tmp_path / "second" / "lineage.json").read_text())
    assert lineage == copy.info["lineage"]
    assert [(e["step"], e["counters"]["games"]) for e in lineage] == [(6, 16)]

    # Going on: the empty replay is refilled by self-play, then the learner resumes
    # with the source's optimiser; the counters keep growing from the source's.
    config.train.total_steps = 9
    third = train(config, tmp_path / "second")
    assert third["resumed_from"] == 6 and third["step"] == 9 and third["iteration"] == 3
    grown = _restore(tmp_path / "second" / "checkpoints", 9, config)
    assert grown.info["counters"]["games"] == 24
    assert grown.info["lineage"] == lineage  # a plain resume adds no continuation


def test_a_continuation_keeps_the_net_and_names_what_differs(tmp_path):
    config = tiny_config()
    config.eval.num_games = 0
    config.train.total_steps = 3
    train(config, tmp_path / "first")
    config.train.init_from = str(tmp_path / "first")  # a workdir: its newest checkpoint
    config.model.preset = "tiny"
    with pytest.raises(ValueError, match=r"model\.preset: 'agz_tiny' -> 'tiny'"):
        train(config, tmp_path / "second")
    config.train.init_from = str(tmp_path / "nothing")
    with pytest.raises(ValueError, match="no checkpoint there"):
        train(config, tmp_path / "third")
