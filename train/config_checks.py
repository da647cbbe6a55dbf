"""Every key of a training or sweep config checked before anything runs.

A bad value is one ``ValueError`` naming the key, the value and what is allowed
(``gojax`` prints it as one line, exit status 2), before a workdir is touched:
a zero batch or a negative board would otherwise fail deep inside JAX, and a
zero ``keep_checkpoints`` or ``updates_per_iteration`` would run to the end
with nothing saved or nothing learned. A key the command does not have (a typo
in a config file: ``ml_collections`` adds it silently) is refused the same way,
since it would otherwise be ignored and the run would use the default.

The helpers (``check_keys``, ``check_ranges``, ``check_board``,
``check_learner``, ...) are shared by every command's check: ``gojax train``'s
is :func:`check_run_config`; ``train-sl``, ``train-pg``, ``train-value``,
``train-rollout`` and ``sweep`` keep theirs beside their default configs, each
with a :class:`KeyRanges` table.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable
from typing import Any

import ml_collections

from gojax import get_rules
from gojax.games import MAX_SIZE, MIN_SIZE

__all__ = [
    "LEARNER_RANGES",
    "MISSING",
    "RUN_RANGES",
    "KeyRanges",
    "bad_value",
    "check_board",
    "check_choice",
    "check_keys",
    "check_learner",
    "check_multiple",
    "check_ranges",
    "check_run_config",
    "get_key",
    "is_int",
    "is_number",
]


@dataclasses.dataclass(frozen=True)
class KeyRanges:
    """The numeric keys of a command's config (dotted), by what they allow.

    A tuple value (``learner.lr_values``, a sweep's ``search.simulations``)
    is checked element by element.
    """

    at_least_one: tuple[str, ...] = ()  # counts and sizes where 0 makes no sense
    at_least_zero: tuple[str, ...] = ()  # 0 means "off" or "none"
    fractions: tuple[str, ...] = ()  # probabilities and mixes: [0, 1]
    positive: tuple[str, ...] = ()  # learning rates, temperatures: finite and > 0

    def keys(self) -> tuple[str, ...]:
        return self.at_least_one + self.at_least_zero + self.fractions + self.positive


# gojax train. Its search keys (c_puct, temperatures, utilities, ...) are checked by
# SelfPlayConfig and SearchConfig, which check_run_config builds.
AT_LEAST_ONE = (
    "selfplay.num_games",
    "selfplay.num_simulations",
    "selfplay.gumbel_considered",
    "replay.capacity",
    "train.total_steps",
    "train.updates_per_iteration",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "eval.num_simulations",
    "gating.num_games",
    "gating.num_simulations",
)
AT_LEAST_ZERO = (
    "seed",
    "board.max_moves",
    "selfplay.num_steps",
    "selfplay.num_slots",
    "selfplay.fast_simulations",
    "selfplay.temperature_moves",
    "selfplay.num_devices",
    "selfplay.gumbel_scale",
    "selfplay.forced_playouts",
    "selfplay.static_score_utility",
    "selfplay.dynamic_score_utility",
    "replay.min_size",
    "train.max_minutes",
    "train.plot_every",
    "train.sgf_games",
    "train.sgf_keep_iterations",
    "train.snapshot_every",
    "eval.num_games",
    "eval.every_iterations",
    "eval.temperature_moves",
    "eval.gumbel_scale",
    "gating.every_iterations",
)
FRACTIONS = (
    "selfplay.dirichlet_fraction",
    "selfplay.no_resign_fraction",
    "selfplay.full_search_prob",
    "selfplay.resign_threshold",
    "gating.threshold",
)

# The ``learner`` group (``LearnerConfig``'s fields), shared by train, train-sl,
# train-pg and train-value.
LEARNER_RANGES = KeyRanges(
    at_least_one=("learner.batch_size", "learner.total_steps"),
    at_least_zero=(
        "learner.warmup_steps",
        "learner.num_devices",
        "learner.fsdp_min_size",
        "learner.weight_decay",
        "learner.l2",
        "learner.grad_clip_norm",
        "learner.momentum",
        "learner.policy_weight",
        "learner.value_weight",
        "learner.score_weight",
        "learner.score_stdev_weight",
        "learner.ownership_weight",
        "learner.opponent_policy_weight",
        "learner.td_value_weight",
        "learner.td_score_weight",
        "learner.shortterm_value_error_weight",
        "learner.shortterm_score_error_weight",
        "learner.optimistic_policy_weight",
    ),
    fractions=("learner.end_lr_factor", "learner.lr_drop_factor"),
    positive=(
        "learner.learning_rate",
        "learner.lr_values",
        "learner.lr_drop_factor",
        "learner.score_huber_delta",
    ),
)
POSITIVE = ("selfplay.pb_c_init",)
# None ("as the search decides") or a number, whose range SearchConfig checks. Their None
# defaults let any type through check_keys, and an override of a None key takes any literal.
OPTIONAL_NUMBERS = (
    "selfplay.move_temperature",
    "selfplay.move_temperature_early",
    "selfplay.root_fpu_reduction",
    "selfplay.root_policy_temperature_early",
)
RUN_RANGES = KeyRanges(AT_LEAST_ONE, AT_LEAST_ZERO, FRACTIONS, POSITIVE)

# What get_key returns for a key the config does not have (None is a value).
MISSING: Any = object()


def get_key(config: ml_collections.ConfigDict, key: str) -> Any:
    """The value at dotted ``key``, or ``MISSING``."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            return MISSING
        node = node[part]
    return node


def bad_value(key: str, value: Any, allowed: str, *, each: bool = False) -> ValueError:
    """The one-line error: ``--config.KEY=VALUE: must be ALLOWED`` (``each must be``
    for a tuple whose elements must be)."""
    return ValueError(f"--config.{key}={value!r}: {'each ' if each else ''}must be {allowed}")


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ----------------------------------------------------------------------------
# Keys and types.


def check_keys(config: ml_collections.ConfigDict, defaults: ml_collections.ConfigDict) -> None:
    """Refuse a key ``defaults`` (the command's default config) does not have, and a
    value of another type than the default's (an integer key given 2.5 or True, a
    number given a string). A key whose default is None takes anything."""
    _check_group(config, defaults, "")


def _check_group(config, defaults, prefix: str) -> None:
    for name in config.keys():
        key = f"{prefix}{name}"
        if name not in defaults:
            raise ValueError(_unknown(key, name, defaults, prefix))
        value, default = config[name], defaults[name]
        if isinstance(default, ml_collections.ConfigDict):
            if not isinstance(value, ml_collections.ConfigDict):
                raise bad_value(key, value, "a group of keys")
            _check_group(value, default, f"{key}.")
        elif default is not None and not _same_type(value, default):
            raise bad_value(key, value, _type_name(default))


def _unknown(key: str, name: str, defaults, prefix: str) -> str:
    known = sorted(defaults.keys())
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {prefix + close[0]!r}?" if close else f"known: {', '.join(known)}"
    where = f" in {prefix[:-1]}" if prefix else ""
    return f"unknown config key {key!r}{where} ({hint})"


def _same_type(value: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return is_int(value)
    if isinstance(default, float):
        return is_number(value)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, tuple | list):
        if not isinstance(value, tuple | list):
            return False
        kind = _element_kind(default)
        return kind is None or all(_same_type(x, kind) for x in value)
    return True


def _element_kind(sequence: Iterable[Any]) -> Any:
    """A representative of the elements' type (0, 0.0 or ""), or None if mixed or empty."""
    kinds = {type(x) for x in sequence}
    if len(kinds) != 1:
        return None
    return {int: 0, float: 0.0, str: ""}.get(kinds.pop())


def _type_name(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float):
        return "a number"
    if isinstance(default, str):
        return "a string"
    kind = type(_element_kind(default))
    return "a tuple" + {int: " of integers", float: " of numbers", str: " of strings"}.get(kind, "")


# ----------------------------------------------------------------------------
# Ranges.


def check_ranges(config: ml_collections.ConfigDict, ranges: KeyRanges) -> None:
    """Refuse the first key of ``ranges`` whose value (or an element of it) is out of
    range; keys ``config`` does not have are skipped."""
    for keys, ok, allowed in (
        (ranges.at_least_one, lambda v: v >= 1, "at least 1"),
        (ranges.at_least_zero, lambda v: v >= 0, "0 or more"),
        (ranges.fractions, lambda v: 0 <= v <= 1, "a number in [0, 1]"),
        (ranges.positive, lambda v: v > 0, "a finite number above 0"),
    ):
        for key in keys:
            value = get_key(config, key)
            if value is MISSING:
                continue
            many = isinstance(value, tuple | list)
            items = value if many else (value,)
            if not all(is_number(x) and math.isfinite(x) and ok(x) for x in items):
                raise bad_value(key, value, allowed, each=many)


def check_choice(config: ml_collections.ConfigDict, key: str, choices: Iterable[Any]) -> None:
    """Refuse ``key`` unless its value is one of ``choices``."""
    value, choices = get_key(config, key), tuple(choices)
    if value is not MISSING and value not in choices:
        raise bad_value(key, value, f"one of {', '.join(map(repr, choices))}")


def check_multiple(config: ml_collections.ConfigDict, key: str, devices_key: str) -> None:
    """Refuse ``key`` (games or a batch split over devices) unless it is a multiple of
    ``devices_key`` when that is set (0: "all devices", known only once JAX starts)."""
    value, devices = get_key(config, key), get_key(config, devices_key)
    if is_int(value) and is_int(devices) and devices > 0 and value % devices:
        raise bad_value(key, value, f"a multiple of {devices_key} ({devices}): split over devices")


def check_slots(config: ml_collections.ConfigDict) -> None:
    """``selfplay.num_slots``: 0, or at most ``num_games``, and below it only for whole
    games (``num_steps`` 0)."""
    slots = get_key(config, "selfplay.num_slots")
    games, steps = get_key(config, "selfplay.num_games"), get_key(config, "selfplay.num_steps")
    if not (is_int(slots) and is_int(games) and is_int(steps)) or slots == 0:
        return
    if slots > games:
        raise bad_value("selfplay.num_slots", slots, f"0 or at most selfplay.num_games ({games})")
    if slots < games and steps:
        raise bad_value(
            "selfplay.num_slots",
            slots,
            f"0 or selfplay.num_games ({games}) with selfplay.num_steps set: slots play "
            "whole games",
        )


def check_board(config: ml_collections.ConfigDict) -> None:
    """``board.size`` (an integer in 2..25), ``board.komi`` (finite), ``board.rules``."""
    size = get_key(config, "board.size")
    if not is_int(size) or not MIN_SIZE <= size <= MAX_SIZE:
        raise bad_value("board.size", size, f"an integer in {MIN_SIZE}..{MAX_SIZE}")
    komi = get_key(config, "board.komi")
    if not is_number(komi) or not math.isfinite(komi):
        raise bad_value("board.komi", komi, "a finite number")
    rules = get_key(config, "board.rules")
    try:
        get_rules(rules)
    except (ValueError, TypeError) as error:
        raise bad_value("board.rules", rules, f"a rule set ({error})") from None


def check_learner(config: ml_collections.ConfigDict) -> None:
    """The ``learner`` group: ranges, choices, the SGD schedule, and a batch that splits
    evenly over ``learner.num_devices``."""
    from train.learner import OPTIMIZERS, PARAM_SHARDINGS, VALUE_LOSSES

    check_ranges(config, LEARNER_RANGES)
    check_choice(config, "learner.optimizer", OPTIMIZERS)
    check_choice(config, "learner.value_loss", VALUE_LOSSES)
    check_choice(config, "learner.param_sharding", PARAM_SHARDINGS)
    boundaries = get_key(config, "learner.lr_boundaries")
    values = get_key(config, "learner.lr_values")
    if boundaries is not MISSING:
        steps = list(boundaries)
        if not all(is_int(b) and b >= 0 for b in steps) or steps != sorted(set(steps)):
            raise bad_value("learner.lr_boundaries", boundaries, "increasing steps, 0 or more")
        if values is not MISSING and len(values) != len(steps) + 1:
            allowed = f"{len(steps) + 1} rates: one more than learner.lr_boundaries"
            raise bad_value("learner.lr_values", values, allowed)
    drops = get_key(config, "learner.lr_drops")
    if drops is not MISSING:
        steps = list(drops)
        if not all(is_int(s) and s >= 0 for s in steps) or steps != sorted(set(steps)):
            raise bad_value("learner.lr_drops", drops, "increasing steps, 0 or more")
    check_multiple(config, "learner.batch_size", "learner.num_devices")


# ----------------------------------------------------------------------------
# gojax train


def check_run_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` for the first key of ``config`` (a ``gojax train`` config)
    that the command does not have or whose value is out of range, naming the key,
    the value and what is allowed."""
    from train import model as model_lib
    from train.loop import default_config, learner_config, selfplay_config

    check_keys(config, default_config())
    check_board(config)
    check_ranges(config, RUN_RANGES)
    check_learner(config)
    for key in OPTIONAL_NUMBERS:
        value = get_key(config, key)
        if value is not None and value is not MISSING:
            if not is_number(value) or not math.isfinite(value):
                raise bad_value(key, value, "a finite number, or None")
    check_multiple(config, "selfplay.num_games", "selfplay.num_devices")
    check_multiple(config, "selfplay.num_slots", "selfplay.num_devices")
    check_slots(config)
    capacity, min_size = get_key(config, "replay.capacity"), get_key(config, "replay.min_size")
    if is_int(capacity) and is_int(min_size) and min_size > capacity:
        raise bad_value("replay.min_size", min_size, f"at most replay.capacity ({capacity})")
    # The search's own checks (c_puct, temperatures, utilities, move sets, ...), the
    # preset and what is left of the learner's: each names its key.
    model_lib.spec_from_config(config.model)
    selfplay_config(config)
    learner_config(config)
