"""The loop around a run's steps: time limit, progress bar, evaluation, metrics, saving, SIGTERM.

``gojax train-pg`` and ``gojax train-value`` share it; each supplies what one
step does and how the run is evaluated::

    step, stopped = run_steps(config.train, step, advance, evaluate=..., save=save,
                              ckpt=ckpt, metrics=metrics_out, unit="iter", postfix=...)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from train.checkpoint import Checkpointer, install_signal_handlers

__all__ = ["run_steps"]


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
