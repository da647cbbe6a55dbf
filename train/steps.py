"""What a run does around its steps: start or resume, then loop with a time limit,
progress bar, evaluation, metrics, saving and SIGTERM.

``gojax train-pg`` and ``gojax train-value`` share it; each supplies what one
step does and how the run is evaluated::

    ckpt, restored = open_checkpoints(workdir, config.train, spec, lconfig, size, config_json)
    state = restored.state if restored else fresh_state(spec, lconfig, key, size, start)
    step, stopped = run_steps(config.train, step, advance, evaluate=..., save=save,
                              ckpt=ckpt, metrics=metrics_out, unit="iter", postfix=...)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from train.checkpoint import Checkpointer, Restored, install_signal_handlers
from train.learner import (
    LearnerConfig,
    TrainState,
    abstract_train_state,
    create_train_state,
    make_optimizer,
)
from train.loop import _check_resumable, _saved_config
from train.model import ModelSpec

__all__ = ["fresh_state", "open_checkpoints", "run_steps"]


def open_checkpoints(
    workdir: Path,
    train: Any,
    spec: ModelSpec,
    lconfig: LearnerConfig,
    size: int,
    config_json: dict[str, Any],
) -> tuple[Checkpointer, Restored | None]:
    """The run's ``Checkpointer`` (``train.checkpoint_every``, ``train.keep_checkpoints``)
    and its newest readable checkpoint, None for a new run.

    Raises ``ValueError`` when ``config_json`` may not resume the run (naming
    the keys) or when it has checkpoints and none can be read.
    """
    ckpt = Checkpointer(
        workdir / "checkpoints", save_every=train.checkpoint_every, keep=train.keep_checkpoints
    )
    latest = ckpt.latest_step()
    if latest is not None:
        _check_resumable(_saved_config(ckpt.directory, latest), config_json, workdir, latest)
    restored = ckpt.restore_latest(abstract_train_state(spec, lconfig, size))
    if restored is None and latest is not None:
        raise ValueError(f"{ckpt.directory}: no checkpoint could be restored (see warnings)")
    if restored is not None:
        _check_resumable(restored.config, config_json, workdir, restored.step)
    return ckpt, restored


def fresh_state(
    spec: ModelSpec, lconfig: LearnerConfig, key: jax.Array, size: int, start: Any = None
) -> TrainState:
    """A new train state: random weights, or ``start``'s ``{"params", "batch_stats"}``
    (e.g. another run's net) with a fresh optimiser state."""
    state = create_train_state(spec, lconfig, key, size)
    if start is None:
        return state
    params = jax.device_put(start["params"])
    return state.replace(
        params=params,
        batch_stats=jax.device_put(start["batch_stats"]),
        opt_state=make_optimizer(lconfig).init(params),
    )


def run_steps(
    train: Any,
    step: int,
    advance: Callable[[int], dict[str, Any]],
    *,
    evaluate: Callable[[int], dict[str, Any]],
    save: Callable[[bool], None],
    ckpt: Checkpointer,
    metrics: Any,
    unit: str,
    postfix: Callable[[dict[str, Any]], dict[str, str]],
) -> tuple[int, str]:
    """Run steps from ``step`` until ``train.total_steps`` or ``train.max_minutes``.

    ``advance(step)`` takes the step after ``step`` and returns its metrics
    record; every ``train.eval_every`` steps (0: never) the fields that
    ``evaluate(new_step)`` returns join it. The loop adds ``step`` and
    ``wall_seconds``, writes the record to ``metrics`` (a
    ``train.loop._Metrics``), plots every ``train.plot_every`` steps, calls
    ``save(False)`` (saving when due) and, when a SIGTERM or SIGINT came,
    saves and stops the process. At the end it saves with ``save(True)``,
    evaluates the last step unless that was just done, plots, and closes
    ``metrics`` and ``ckpt``. ``train.progress`` draws a tqdm bar whose
    postfix is ``postfix(record)``. Returns the last step and why the loop
    stopped: ``"total_steps"`` or ``"max_minutes"``.
    """
    guard = install_signal_handlers(lambda signum: (save(True), ckpt.close()), defer=True)
    started = time.perf_counter()
    deadline = started + 60.0 * train.max_minutes if train.max_minutes else math.inf
    evaluated = None  # the last step evaluated
    bar = None
    if train.progress:
        from tqdm import tqdm

        bar = tqdm(total=train.total_steps, initial=step, unit=unit, dynamic_ncols=True)
    try:
        while step < train.total_steps and time.perf_counter() < deadline:
            record = advance(step)
            step += 1
            if train.eval_every and step % train.eval_every == 0:
                record.update(evaluate(step))
                evaluated = step
            record.update(step=step, wall_seconds=time.perf_counter() - started)
            metrics.write(record)
            if train.plot_every and step % train.plot_every == 0:
                metrics.plot()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(postfix(record), refresh=False)
            save(False)
            guard.check()
        stopped = "total_steps" if step >= train.total_steps else "max_minutes"
        save(True)
        ckpt.wait()
    finally:
        guard.uninstall()
        if bar is not None:
            bar.close()
    if evaluated != step:
        metrics.write({"step": step, **evaluate(step)})
    metrics.plot()
    metrics.close()
    ckpt.close()
    return step, stopped
