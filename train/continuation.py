"""Continuing a run elsewhere: a fresh workdir started from another run's checkpoint.

A long run outlives the machine it started on only through a checkpoint small
enough to carry. ``gojax snapshot`` writes one (the train state -- parameters,
BatchNorm statistics, optimiser state, step -- and the loop's counters and
lineage, without the replay), and ``--config.train.init_from=PATH`` starts a
fresh workdir from it: the same state and counters, an empty replay that
self-play refills (``replay.min_size`` positions before the learner resumes).

The counters are cumulative over the whole lineage (games, positions, CPU and
wall seconds), so the compute behind a network is known however many machines
it went through; each continuation appends an entry to the lineage (where it
came from, at which step, with which counters), kept in every later checkpoint
and in ``lineage.json`` of the workdir.

A continuation may change how the run goes on (self-play, replay, learner
schedule, ``train.*``), not what the state is: the network (``model.*``), the
board size and the optimiser must be the source's.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

from gojax.atomic import write_atomic
from train.checkpoint import Checkpointer, Restored

__all__ = [
    "LINEAGE_FILE",
    "STATE_KEYS",
    "checkpoint_counters",
    "continue_from",
    "resolve_checkpoint",
    "snapshot",
    "write_lineage",
]

LINEAGE_FILE = "lineage.json"
# Config keys that decide the train state's structure: a continuation keeps them.
STATE_KEYS = ("model.", "board.size", "learner.optimizer", "learner.param_sharding")


def resolve_checkpoint(path: str | os.PathLike) -> tuple[str, int]:
    """``(checkpoints directory, step)`` of ``path``: a step directory
    (``.../checkpoints/<step>``), a directory of steps (the newest), or a run's
    workdir (its newest checkpoint). ``ValueError`` naming ``path`` otherwise."""
    path = Path(path)
    if path.is_dir() and path.name.isdigit() and (path / "state").is_dir():
        return str(path.parent.resolve()), int(path.name)
    for directory in (path / "checkpoints", path):
        if directory.is_dir():
            steps = sorted(
                int(p.name)
                for p in directory.iterdir()
                if p.name.isdigit() and (p / "state").is_dir()
            )
            if steps:
                return str(directory.resolve()), steps[-1]
    raise ValueError(
        f"train.init_from={os.fspath(path)!r}: no checkpoint there (a step directory "
        "'.../<step>' with a 'state' folder, a folder of them, or a run's workdir)"
    )


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def _read_meta(directory: str | os.PathLike, step: int) -> dict[str, Any]:
    """The JSON ``meta`` item of checkpoint ``step`` in ``directory`` (config, info)."""
    return json.loads((Path(directory) / str(step) / "meta" / "metadata").read_text())


def state_key_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``"key: old -> new"`` for each of :data:`STATE_KEYS` on which the configs differ."""
    a, b = _flat(saved), _flat(current)
    keys = sorted(k for k in set(a) | set(b) if k.startswith(STATE_KEYS))
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def continue_from(path: str | os.PathLike, template: Any, config: dict[str, Any]) -> Restored:
    """The train state, counters and lineage of the checkpoint at ``path`` (the replay
    left unread), checked to be the net and optimiser ``config`` trains.

    ``template``: the abstract train state (shapes and shardings) to restore onto.
    Returns the ``Restored`` with ``info["lineage"]`` extended by this continuation.
    """
    directory, step = resolve_checkpoint(path)
    ckpt = Checkpointer(directory)
    try:
        meta = _read_meta(directory, step)
    except (OSError, ValueError) as error:
        ckpt.close()
        raise ValueError(f"{directory}/{step}: cannot read its metadata ({error})") from error
    saved = meta.get("config") or {}
    differ = state_key_differences(saved, config)
    if differ:
        ckpt.close()
        raise ValueError(
            f"train.init_from: {directory}/{step} holds another net or optimiser "
            f"({', '.join(differ)}); a continuation keeps them"
        )
    try:
        restored = ckpt.restore(step, template, with_extra=False)
    except Exception as error:  # noqa: BLE001 - any failure means the checkpoint is unusable
        raise ValueError(
            f"train.init_from: {directory}/{step} cannot be read ({type(error).__name__}: {error})"
        ) from error
    finally:
        ckpt.close()
    info = dict(restored.info)
    counters = dict(info.get("counters", {}))
    entry = {
        "init_from": os.fspath(path),  # as given: a lineage names no machine's folders
        "step": step,
        "counters": counters,
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    info["lineage"] = [*info.get("lineage", []), entry]
    restored.info = info
    return restored


def checkpoint_counters(workdir: str | os.PathLike, step: int) -> dict[str, Any]:
    """The training loop's counters saved with checkpoint ``step`` of the run in
    ``workdir`` (``games``, ``positions``, ``cpu_seconds``, ...), cumulative over its
    lineage; ``{}`` when the checkpoint has none (written before they were kept)."""
    try:
        return dict(
            _read_meta(Path(workdir) / "checkpoints", step).get("info", {}).get("counters", {})
        )
    except (OSError, ValueError, AttributeError):
        return {}


def write_lineage(workdir: str | os.PathLike, lineage: list[dict[str, Any]]) -> None:
    """``workdir/lineage.json``: the continuations this run's state went through."""
    write_atomic(Path(workdir) / LINEAGE_FILE, json.dumps(lineage, indent=2) + "\n")


def snapshot(workdir: str | os.PathLike, out: str | os.PathLike, step: int | None = None) -> int:
    """Copy checkpoint ``step`` (None: the newest) of the run in ``workdir`` to
    ``out/checkpoints/<step>/`` without its replay: state, config, counters and lineage.
    Returns the step. ``out`` then reads as a run's workdir: ``train.init_from``
    continues from it, sweeps and ``gojax export`` read its networks."""
    import ml_collections

    from train.learner import abstract_train_state
    from train.loop import learner_config
    from train.model import spec_from_config

    directory, newest = resolve_checkpoint(workdir)
    step = newest if step is None else int(step)
    source = Checkpointer(directory)
    try:
        run = ml_collections.ConfigDict(_read_meta(directory, step)["config"])
        template = abstract_train_state(
            spec_from_config(run.model), learner_config(run), run.board.size
        )
        restored = source.restore(step, template, with_extra=False)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{directory}/{step}: cannot be read ({error})") from error
    finally:
        source.close()
    target = Checkpointer(Path(out) / "checkpoints", keep=2**31 - 1)
    try:
        target.save(step, restored.state, config=restored.config, info=restored.info, force=True)
    finally:
        target.close()
    # Orbax's completion markers name the absolute folder they were written to; a
    # snapshot is made to be copied and committed, so they name only the step.
    for marker in (Path(out) / "checkpoints" / str(step)).rglob("commit_success.txt"):
        write_atomic(marker, f"Checkpoint commit was successful (step {step})")
    return step
