"""Every key of a ``gojax train`` config checked before anything runs.

A bad value is one ``ValueError`` naming the key, the value and what is allowed
(``gojax`` prints it as one line, exit status 2), before a workdir is touched:
a zero batch or a negative board would otherwise fail deep inside JAX, and a
zero ``keep_checkpoints`` or ``updates_per_iteration`` would run to the end
with nothing saved or nothing learned.
"""

from __future__ import annotations

import math
from typing import Any

import ml_collections

from gojax._coords import MAX_SIZE, MIN_SIZE

__all__ = ["check_run_config"]

# key: (lowest, highest) allowed; None is unbounded. Integers unless the default is a float.
AT_LEAST_ONE = (
    "selfplay.num_games",
    "selfplay.num_simulations",
    "selfplay.gumbel_considered",
    "replay.capacity",
    "learner.batch_size",
    "learner.total_steps",
    "train.total_steps",
    "train.updates_per_iteration",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "eval.num_simulations",
    "gating.num_games",
    "gating.num_simulations",
)
AT_LEAST_ZERO = (
    "board.max_moves",
    "selfplay.num_steps",
    "selfplay.fast_simulations",
    "selfplay.temperature_moves",
    "selfplay.num_devices",
    "replay.min_size",
    "learner.warmup_steps",
    "learner.num_devices",
    "train.max_minutes",
    "train.plot_every",
    "train.sgf_games",
    "train.sgf_keep_iterations",
    "train.snapshot_every",
    "eval.num_games",
    "eval.every_iterations",
    "eval.temperature_moves",
    "gating.every_iterations",
    "learner.weight_decay",
    "learner.l2",
    "learner.grad_clip_norm",
    "learner.momentum",
)
FRACTIONS = (
    "selfplay.dirichlet_fraction",
    "selfplay.no_resign_fraction",
    "selfplay.full_search_prob",
    "selfplay.resign_threshold",
    "gating.threshold",
    "learner.end_lr_factor",
)
POSITIVE_FLOATS = ("learner.learning_rate",)


def _get(config: ml_collections.ConfigDict, key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            return None
        node = node[part]
    return node


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bad(key: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"--config.{key}={value!r}: must be {allowed}")


def check_run_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` for the first key of ``config`` (a ``gojax train`` config)
    whose value is out of range, naming the key, the value and the range."""
    size = _get(config, "board.size")
    if not isinstance(size, int) or isinstance(size, bool) or not MIN_SIZE <= size <= MAX_SIZE:
        raise _bad("board.size", size, f"an integer in {MIN_SIZE}..{MAX_SIZE}")
    for keys, low, allowed in (
        (AT_LEAST_ONE, 1, "at least 1"),
        (AT_LEAST_ZERO, 0, "0 or more"),
    ):
        for key in keys:
            value = _get(config, key)
            if value is None:
                continue
            if not _is_number(value) or not math.isfinite(value) or value < low:
                raise _bad(key, value, allowed)
    for key in FRACTIONS:
        value = _get(config, key)
        if value is not None and (not _is_number(value) or not 0.0 <= value <= 1.0):
            raise _bad(key, value, "a number in [0, 1]")
    for key in POSITIVE_FLOATS:
        value = _get(config, key)
        if value is not None and (not _is_number(value) or not math.isfinite(value) or value <= 0):
            raise _bad(key, value, "a finite number above 0")
    komi = _get(config, "board.komi")
    if not _is_number(komi) or not math.isfinite(komi):
        raise _bad("board.komi", komi, "a finite number")
    capacity, min_size = _get(config, "replay.capacity"), _get(config, "replay.min_size")
    if capacity is not None and min_size is not None and min_size > capacity:
        raise _bad("replay.min_size", min_size, f"at most replay.capacity ({capacity})")
