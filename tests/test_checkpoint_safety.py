"""Checkpoints never lose the last good state: digests, quarantine, rotation.

The states here are small dicts of numpy arrays (``Checkpointer`` takes any
pytree); the training loop's own use is covered in test_train_loop.py.
"""

import os
import warnings

import numpy as np
import pytest

from train.checkpoint import CORRUPT_FOLDER, Checkpointer, payload_digest


def _state(offset: float) -> dict[str, np.ndarray]:
    return {
        "w": np.arange(50_000, dtype=np.float32) + offset,
        "b": np.full(7, offset, np.float32),
        "step": np.asarray(int(offset), np.int64),
    }


def _template() -> dict[str, np.ndarray]:
    return {name: np.zeros_like(x) for name, x in _state(0).items()}


def _flip_bytes(step_dir, count: int = 64) -> str:
    """Invert ``count`` bytes in the middle of the largest file of a step's state."""
    files = [
        os.path.join(root, name)
        for root, _, names in os.walk(os.path.join(step_dir, "state"))
        for name in names
    ]
    path = max(files, key=os.path.getsize)
    data = bytearray(open(path, "rb").read())
    middle = len(data) // 2
    for i in range(count):
        data[middle + i] ^= 0xFF
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def _restore_latest(directory):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        restored = Checkpointer(directory).restore_latest(_template())
    return restored, [str(w.message) for w in record]


def test_digest_names_every_leaf_and_byte():
    a = _state(1)
    assert payload_digest(a) == payload_digest(_state(1))
    b = _state(1)
    b["w"][1234] = np.nextafter(b["w"][1234], np.float32(np.inf))  # one bit
    assert payload_digest(b) != payload_digest(a)
    renamed = {"v" if k == "w" else k: v for k, v in a.items()}
    assert payload_digest(renamed) != payload_digest(a)
    retyped = dict(a, b=a["b"].astype(np.float64))
    assert payload_digest(retyped) != payload_digest(a)


def test_flipped_bytes_are_caught_and_the_previous_step_restored(tmp_path):
    ckpt = Checkpointer(tmp_path, save_every=1, keep=3)
    assert ckpt.save(1, _state(1), extra={"replay": np.arange(10)})
    assert ckpt.save(2, _state(2), extra={"replay": np.arange(20)})
    ckpt.close()
    # Orbax alone reads this damage back without complaint: only the digest sees it.
    _flip_bytes(tmp_path / "2")

    restored, messages = _restore_latest(tmp_path)
    assert restored.step == 1
    np.testing.assert_array_equal(restored.state["w"], _state(1)["w"])
    np.testing.assert_array_equal(restored.extra["replay"], np.arange(10))
    assert any("does not match the digest" in m and "/2" in m for m in messages)
    # The damaged step is kept for inspection, out of the way of the run.
    assert sorted(os.listdir(tmp_path / CORRUPT_FOLDER)) == ["2"]
    assert Checkpointer(tmp_path).all_steps() == [1]


def test_damaged_replay_contents_are_caught(tmp_path):
    ckpt = Checkpointer(tmp_path, save_every=1, keep=3)
    ckpt.save(1, _state(1), extra={"replay": np.zeros(10)})
    ckpt.save(2, _state(2), extra={"replay": np.arange(300_000, dtype=np.int32)})
    ckpt.close()
    files = [
        os.path.join(root, name)
        for root, _, names in os.walk(tmp_path / "2" / "extra")
        for name in names
    ]
    path = max(files, key=os.path.getsize)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(data)

    restored, messages = _restore_latest(tmp_path)
    assert restored.step == 1
    assert any("its extra does not match" in m for m in messages)


def test_an_unreadable_step_is_replaced_by_the_next_save_of_it(tmp_path):
    ckpt = Checkpointer(tmp_path, save_every=1, keep=3)
    ckpt.save(1, _state(1))
    ckpt.save(2, _state(2))
    ckpt.close()
    for root, _, names in os.walk(tmp_path / "2" / "state"):
        for name in names:
            open(os.path.join(root, name), "wb").write(b"\0garbage")

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ckpt = Checkpointer(tmp_path, save_every=1, keep=3)
        restored = ckpt.restore_latest(_template())
        assert restored.step == 1
        # The run goes on from step 1 and reaches step 2 again: a fresh save replaces it.
        assert ckpt.save(2, _state(22))
    assert any("2 is corrupt or incomplete" in str(w.message) for w in record)
    assert os.listdir(tmp_path / CORRUPT_FOLDER) == ["2"]
    again, _ = _restore_latest(tmp_path)
    assert again.step == 2
    np.testing.assert_array_equal(again.state["b"], _state(22)["b"])


def test_rotation_never_deletes_the_newest_good_step(tmp_path, monkeypatch):
    ckpt = Checkpointer(tmp_path, save_every=1, keep=1)
    assert ckpt.save(1, _state(1))
    # From now on the disk hands back something other than what was written.
    original = ckpt._manager.restore

    def failing_read_back(step, args=None):
        if step > 1:
            raise OSError("input/output error")
        return original(step, args=args)

    monkeypatch.setattr(ckpt._manager, "restore", failing_read_back)
    with pytest.warns(UserWarning, match="did not read back as written"):
        for step in (2, 3, 4):
            assert ckpt.save(step, _state(step))
    # keep=1 would leave only step 4; step 1, the newest good one, survives too.
    assert ckpt.all_steps() == [1, 4]
    monkeypatch.undo()
    ckpt.close()

    # Once a later save reads back whole, the old good step may go.
    ckpt = Checkpointer(tmp_path, save_every=1, keep=1)
    assert ckpt.save(5, _state(5))
    assert ckpt.all_steps() == [5]


def test_rotation_keeps_the_newest_steps(tmp_path):
    ckpt = Checkpointer(tmp_path, save_every=2, keep=2)
    for step in range(1, 9):
        ckpt.save(step, _state(step))
    assert ckpt.all_steps() == [6, 8]


def test_keep_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="keep must be at least 1, not 0"):
        Checkpointer(tmp_path, keep=0)


def test_checkpoints_without_a_digest_still_restore(tmp_path):
    # Checkpoints written before digests existed have none in their meta: read as before.
    import orbax.checkpoint as ocp

    manager = ocp.CheckpointManager(tmp_path, item_names=("state", "extra", "meta"))
    manager.save(
        3,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(_state(3)),
            meta=ocp.args.JsonSave({"config": {"a": 1}, "has_extra": False}),
        ),
    )
    manager.wait_until_finished()
    manager.close()
    restored, messages = _restore_latest(tmp_path)
    assert restored.step == 3 and restored.config == {"a": 1}
    assert not [m for m in messages if "digest" in m]


def test_a_run_resumes_past_a_damaged_checkpoint_and_keeps_a_good_one(tmp_path):
    """The issue's reproducer: damage the newest checkpoint's parameters and resume.
    The damage is reported, the step is set aside, the run goes on from the previous
    good step, and every checkpoint it leaves reads back whole."""
    import jax
    from test_train_loop import tiny_config

    import train.loop as loop

    config = tiny_config()
    config.eval.num_games = 0
    config.train.updates_per_iteration = 2
    config.train.checkpoint_every = 2
    config.train.keep_checkpoints = 2
    config.train.total_steps = 4
    workdir = tmp_path / "run"
    loop.train(config, workdir)
    checkpoints = workdir / "checkpoints"
    assert Checkpointer(checkpoints).all_steps() == [2, 4]
    _flip_bytes(checkpoints / "4")

    config.train.total_steps = 6
    with pytest.warns(UserWarning, match="does not match the digest"):
        summary = loop.train(config, workdir)
    assert summary["resumed_from"] == 2
    assert os.listdir(checkpoints / CORRUPT_FOLDER) == ["4"]
    ckpt = Checkpointer(checkpoints)
    try:
        assert ckpt.all_steps() == [4, 6]
        template = loop.abstract_train_state(
            loop.model_lib.spec_from_config(config.model), loop.learner_config(config), 5
        )
        for step in (4, 6):
            restored = ckpt.restore(step, template)  # raises if its digest fails
            assert int(jax.device_get(restored.state.step)) == step
    finally:
        ckpt.close()
