"""Per-process arrays of a checkpoint (a multi-host run's replay buffers).

Two processes are played here by two ``Checkpointer``s with explicit process
indices over one directory: process 0 makes the step (orbax and its own file),
process 1 writes its own file as its ``save`` does before the step is made.
The 2-process training run is in test_train_loop.py.
"""

import os
import warnings

import numpy as np

from train import process_arrays
from train.checkpoint import Checkpointer, payload_digest


def _state(offset: float) -> dict[str, np.ndarray]:
    return {"w": np.arange(1000, dtype=np.float32) + offset, "step": np.asarray(int(offset))}


def _replay(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"capacity": np.asarray(64), "data/value": rng.normal(size=64).astype(np.float32)}


def _save_two_processes(directory, step: int) -> tuple[dict, dict]:
    replays = _replay(10 * step), _replay(10 * step + 1)
    # Process 1's half of a collective save: its file, written before the step exists.
    process_arrays.write(directory, step, {"replay": replays[1]}, 1, 2, payload_digest)
    first = Checkpointer(directory, save_every=1, keep=2, process_index=0, process_count=2)
    counters = {"games": np.asarray(step * 100)}
    assert first.save(
        step, _state(step), extra={"counters": counters}, local={"replay": replays[0]}
    )
    first.close()
    return replays


def _restore(directory, index: int, count: int):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ckpt = Checkpointer(directory, process_index=index, process_count=count)
        restored = ckpt.restore_latest({k: np.zeros_like(v) for k, v in _state(0).items()})
    return restored, [str(w.message) for w in record]


def _assert_same(tree: dict, expected: dict) -> None:
    assert sorted(tree) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(tree[name], value)


def test_each_process_restores_its_own_replay(tmp_path):
    replays = _save_two_processes(tmp_path, 1)
    assert sorted(os.listdir(tmp_path / "local" / "1")) == [
        "process-0-of-2.npz",
        "process-1-of-2.npz",
    ]
    for index in (0, 1):
        restored, messages = _restore(tmp_path, index, 2)
        assert restored.step == 1 and not messages
        _assert_same(restored.extra["replay"], replays[index])
        assert int(restored.extra["counters"]["games"]) == 100  # shared arrays on every process
    restored_0, _ = _restore(tmp_path, 0, 2)
    restored_1, _ = _restore(tmp_path, 1, 2)
    assert not np.array_equal(
        restored_0.extra["replay"]["data/value"], restored_1.extra["replay"]["data/value"]
    )


def test_a_lost_or_damaged_file_empties_that_process_alone_on_the_same_step(tmp_path):
    replays = _save_two_processes(tmp_path, 1)
    path = tmp_path / "local" / "1" / "process-1-of-2.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    restored, messages = _restore(tmp_path, 1, 2)
    assert restored.step == 1 and "replay" not in restored.extra
    assert any("process 1" in m and "refilled" in m for m in messages)
    restored, messages = _restore(tmp_path, 0, 2)  # process 0 unaffected
    _assert_same(restored.extra["replay"], replays[0])
    path.unlink()
    restored, messages = _restore(tmp_path, 1, 2)
    assert restored.step == 1 and "replay" not in restored.extra
    assert any("is missing" in m for m in messages)


def test_another_process_count_takes_the_files_by_index(tmp_path):
    replays = _save_two_processes(tmp_path, 1)
    restored, messages = _restore(tmp_path, 0, 1)
    _assert_same(restored.extra["replay"], replays[0])
    assert any("saved by 2 processes, restored by 1" in m for m in messages)
    restored, messages = _restore(tmp_path, 2, 3)
    assert "replay" not in restored.extra
    assert any("this is process 2" in m for m in messages)


def test_rotation_deletes_a_process_files_with_its_step(tmp_path):
    for step in (1, 2, 3):
        _save_two_processes(tmp_path, step)
    assert Checkpointer(tmp_path).all_steps() == [2, 3]
    # Process 0 rotated step 1 out with its own file; process 1's waits for its rotation.
    assert os.listdir(tmp_path / "local" / "1") == ["process-1-of-2.npz"]
    process_arrays.delete(tmp_path, 1, 1)  # what process 1's rotation does
    assert sorted(os.listdir(tmp_path / "local")) == ["2", "3"]
    assert len(os.listdir(tmp_path / "local" / "3")) == 2


def test_one_process_keeps_local_arrays_in_extra(tmp_path):
    ckpt = Checkpointer(tmp_path, save_every=1)
    ckpt.save(
        1, _state(1), extra={"counters": {"games": np.asarray(5)}}, local={"replay": _replay(0)}
    )
    ckpt.close()
    assert not (tmp_path / "local").exists()
    restored, _ = _restore(tmp_path, 0, 1)
    _assert_same(restored.extra["replay"], _replay(0))


def test_flatten_round_trips_nested_dicts():
    tree = {"a": {"b": np.arange(3), "c": {"d": np.ones(2)}}, "e": np.zeros(1)}
    back = process_arrays.unflatten(process_arrays.flatten(tree))
    np.testing.assert_array_equal(back["a"]["c"]["d"], np.ones(2))
    assert sorted(process_arrays.flatten(tree)) == ["a|b", "a|c|d", "e"]
