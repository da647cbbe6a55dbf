"""A run config: its keys and defaults, loading, overrides, JSON, and whether it may resume.

``default_config()`` names every key of a training run; ``load_config`` reads a
``configs/*.py`` file, ``apply_overrides`` applies ``--config.KEY=VALUE`` flags, and
``incompatible_keys`` / ``_check_resumable`` say whether a checkpoint written under
one config may be resumed under another. Kept apart from ``train.loop`` (which
re-exports these names) because the CLI, the other trainers and the sweeps read
configs without running the loop.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_collections

from gojax.search import KATAGO_PUCT_RANGES, SearchConfig
from train.learner import LearnerConfig

# Keys that may change between a run and its resumption: how long to run, how
# often to save or evaluate. Everything else changes what is trained.
RESUMABLE_PREFIXES = ("train.", "eval.", "learner.num_devices", "selfplay.num_devices")


# ----------------------------------------------------------------------------
# Configs: loading and overrides.


def load_config(path: str | os.PathLike) -> ml_collections.ConfigDict:
    """``get_config()`` of a Python config file; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise OSError(f"config file {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"gojax_config_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise ValueError(f"{path}: cannot load: {type(error).__name__}: {error}") from error
    if not hasattr(module, "get_config"):
        raise ValueError(f"{path}: no get_config() function")
    try:
        config = module.get_config()
    except Exception as error:  # a typo read (AttributeError) or a mistyped value (TypeError)
        raise ValueError(f"{path}: get_config() failed: {type(error).__name__}: {error}") from error
    if not isinstance(config, ml_collections.ConfigDict):
        raise ValueError(f"{path}: get_config() must return an ml_collections.ConfigDict")
    return config


def default_config() -> ml_collections.ConfigDict:
    """Every key a run config has, with defaults; ``configs/*.py`` start from this.

    Groups: ``board`` (the game), ``model``, ``selfplay`` (search and games per
    iteration), ``replay``, ``learner`` (the fields of ``LearnerConfig``),
    ``train`` (length, saving, logging), ``eval`` (the final arena). 0 means
    "off/default" for the optional integers (``max_moves``, ``num_steps``,
    ``fast_simulations``) and ``resign_threshold``.
    """
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.multihost = False  # call jax.distributed.initialize() (TPU pods, SLURM)
    c.board = ml_collections.ConfigDict(dict(size=9, komi=7.0, rules="tromp-taylor", max_moves=0))
    # opponent_policy: KataGo presets only, a second policy output trained on the
    # opponent's reply (learner.opponent_policy_weight; KataGo's auxiliary target).
    # short_term_heads: KataGo presets only, KataGo's short-term outputs (temporal-
    # difference value and score, their expected errors, the optimistic policy).
    c.model = ml_collections.ConfigDict(
        dict(
            preset="agz_tiny",
            dtype="float32",
            opponent_policy=False,
            activation="",
            short_term_heads=False,
        )
    )
    c.selfplay = ml_collections.ConfigDict(
        dict(
            num_games=64,
            num_steps=0,
            # Games in play at once, the batch each step searches: a game that ends
            # frees its slot for the next of the iteration's num_games, so the batch
            # stays full of running games. 0: num_games (each game its own slot; a
            # slot whose game ended idles until the longest one ends). Below
            # num_games only for whole games (num_steps 0).
            num_slots=0,
            search_kind="puct",
            num_simulations=32,
            pb_c_init=1.25,
            # Gumbel only: root moves sampled for sequential halving, and the scale of
            # the Gumbel noise that samples them (1: the paper's exploration in self-play).
            gumbel_considered=16,
            gumbel_scale=1.0,
            dirichlet_fraction=0.25,
            # PUCT only: KataGo's forced playouts and policy target pruning, k in
            # n_forced = sqrt(k P sum N) (KataGo: 2); 0: off. Full searches only.
            forced_playouts=0.0,
            # PUCT only: False searches on AlphaGo Zero's raw values in [-1, 1] rather
            # than mctx's normalised ones (SearchConfig.normalise_values).
            normalise_values=True,
            # search_kind "katago" only: the weights of KataGo's score utility
            # (SearchConfig.static_score_utility / dynamic_score_utility); 0 and 0:
            # search on the value alone.
            static_score_utility=SearchConfig.static_score_utility,
            dynamic_score_utility=SearchConfig.dynamic_score_utility,
            # search_kind "katago" only: the constants of KataGo's PUCT, KataGo's names
            # (cpuctExploration, ..., rootFpuReductionMax; SearchConfig's fields): the
            # exploration c(N) = cpuct + log * ln((N + base) / base), its scale by the
            # utilities' spread, the first-play urgency reductions (root: None = 0.1,
            # 0 under root noise).
            **{field: getattr(SearchConfig, field) for field in KATAGO_PUCT_RANGES},
            # PUCT and KataGo's PUCT: KataGo's rootPolicyTemperature(Early), the root
            # prior raised to 1 / T before the noise, T from the early value at move 0
            # toward the late one (SearchConfig.root_policy_temperature; None: early =
            # late). KataGo's self-play: 1.1 late, 1.25 early. Cheap searches use 1.
            root_policy_temperature=1.0,
            root_policy_temperature_early=None,
            # AlphaGo Zero's move temperature: 1 for the first temperature_moves moves
            # of a game, then the best move. Or KataGo's: move_temperature (late) and
            # move_temperature_early, every move drawn from visits ** (1 / T) (KataGo's
            # self-play: 0.15 late, 0.75 early); None: AlphaGo Zero's.
            temperature_moves=8,
            move_temperature=None,
            move_temperature_early=None,
            # KataGo's chosenMoveTemperatureHalflife: moves (on 19x19) over which the
            # early root policy and move temperatures halve their distance to the late.
            temperature_halflife=SearchConfig.temperature_halflife,
            resign_threshold=0.0,
            no_resign_fraction=0.1,
            fast_simulations=0,
            full_search_prob=0.25,
            moves="sensible",  # SearchConfig.moves: "sensible" or "legal" (AlphaGo Zero)
            num_devices=0,  # local devices the games are split over; 0: all that divide num_games
        )
    )
    c.replay = ml_collections.ConfigDict(
        dict(capacity=100_000, min_size=1_000, one_per_game=False, augment=True)
    )
    c.learner = learner_group(LearnerConfig())
    c.train = ml_collections.ConfigDict(
        dict(
            total_steps=1_000,
            updates_per_iteration=10,
            max_minutes=0.0,  # 0: no time limit
            checkpoint_every=100,
            keep_checkpoints=3,
            plot_every=5,
            sgf_games=2,
            sgf_keep_iterations=5,
            progress=True,
            # A checkpoint to start a fresh workdir from (train.continuation): its
            # state and counters, the replay refilled by self-play. "": start afresh.
            init_from="",
            # Every this many learner steps, a replay-free copy of the state under
            # snapshots/checkpoints/<step> (all kept: an Elo curve's networks,
            # starting points of continuations). 0: none.
            snapshot_every=0,
        )
    )
    # AlphaGo Zero's gating: self-play uses the best network so far, and every
    # ``every_iterations`` iterations the learner's network plays it and
    # replaces it if it wins more than ``threshold``. 0: off (AlphaZero:
    # self-play always uses the newest network).
    c.gating = ml_collections.ConfigDict(
        dict(every_iterations=0, num_games=64, threshold=0.55, num_simulations=16)
    )
    c.eval = ml_collections.ConfigDict(
        dict(
            num_games=32,
            num_simulations=16,
            temperature_moves=0,
            every_iterations=0,
            # Gumbel only: 0 plays the strongest move (the sweeps' and GTP's default).
            gumbel_scale=0.0,
        )
    )
    return c


def _convert(text: str, current: Any, key: str) -> Any:
    """``text`` as the type of the current value of ``key``."""
    try:
        if isinstance(current, bool):
            lowered = text.strip().lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError(text)
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
        if isinstance(current, str):
            return text
        if isinstance(current, tuple | list):
            value = ast.literal_eval(text)
            value = value if isinstance(value, tuple | list) else (value,)
            return type(current)(value)
        if current is None:
            try:
                return ast.literal_eval(text)
            except (ValueError, SyntaxError):
                return text
    except (ValueError, SyntaxError) as error:
        kind = type(current).__name__
        raise ValueError(f"--config.{key}={text}: not a valid {kind}") from error
    raise ValueError(f"--config.{key}: cannot override a {type(current).__name__}")


def apply_overrides(config: ml_collections.ConfigDict, args: Sequence[str]) -> None:
    """Apply ``--config.a.b=value`` (or ``--config.a.b value``) overrides in place.

    The value is converted to the type of the current value (bool accepts
    true/false/1/0; tuples and lists are Python literals such as ``(1,2)``;
    a None field takes any literal). An unknown key or a bad value raises
    ``ValueError`` naming it.
    """
    args = list(args)
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--config."):
            raise ValueError(f"unexpected argument {arg!r} (overrides are --config.KEY=VALUE)")
        if "=" in arg:
            key, text = arg[len("--config.") :].split("=", 1)
        elif i + 1 < len(args):
            key, text = arg[len("--config.") :], args[i + 1]
            i += 1
        else:
            raise ValueError(f"{arg}: missing value")
        node, parts = config, key.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(node, ml_collections.ConfigDict) or part not in node:
                known = sorted(node.keys()) if isinstance(node, ml_collections.ConfigDict) else []
                where = ".".join(parts[:depth]) or "the config"
                raise ValueError(f"unknown config key {key!r} ({where} has {known})")
            if depth < len(parts) - 1:
                node = node[part]
        current = node[parts[-1]]
        if isinstance(current, ml_collections.ConfigDict):
            raise ValueError(f"--config.{key}: a group; set one of its keys")
        value = _convert(text, current, key)
        try:
            node[parts[-1]] = value
        except TypeError as error:
            raise ValueError(f"--config.{key}={text}: {error}") from error
        i += 1


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict | ml_collections.ConfigDict):
        out = {}
        for k in tree.keys():
            out.update(_flatten(tree[k], f"{prefix}{k}."))
        return out
    if isinstance(tree, tuple | list):
        tree = [_jsonable(x) for x in tree]
    return {prefix[:-1]: tree}


def _jsonable(x: Any) -> Any:
    return list(x) if isinstance(x, tuple) else x


def config_to_json(config: ml_collections.ConfigDict) -> dict[str, Any]:
    """The config as a JSON-able dict (tuples become lists)."""
    return json.loads(json.dumps(config.to_dict(), default=_jsonable))


def incompatible_keys(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Dotted keys whose values differ and may not change on resume (see RESUMABLE_PREFIXES).

    A key that ``saved`` lacks (added to ``default_config`` after it was written)
    counts as its default, so older runs resume when the new key is left alone.
    """
    b, defaults = _flatten(current), _flatten(config_to_json(default_config()))
    a = {k: defaults[k] for k in b.keys() & defaults.keys()} | _flatten(saved)
    differ = [k for k in sorted(set(a) | set(b)) if a.get(k, "<missing>") != b.get(k, "<missing>")]
    return [k for k in differ if not k.startswith(RESUMABLE_PREFIXES)]


def _saved_config(directory: str, step: int) -> dict[str, Any] | None:
    """The config in checkpoint ``step``'s metadata, or None if it cannot be read."""
    try:
        return json.loads((Path(directory) / str(step) / "meta" / "metadata").read_text())["config"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _check_resumable(
    saved: dict[str, Any] | None, current: dict[str, Any], workdir, step, where=None
) -> None:
    """Raise ``ValueError`` naming the keys if ``current`` may not resume ``saved``;
    the message names ``where`` (default: the workdir's checkpoints folder)."""
    if saved is None:
        return
    bad = incompatible_keys(saved, current)
    if bad:
        old, new = _flatten(saved), _flatten(current)
        detail = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in bad)
        where = where or Path(workdir) / "checkpoints"
        raise ValueError(
            f"{where}: cannot resume step {step} with a different config ({detail}); "
            "use a new workdir"
        )


def learner_group(config: LearnerConfig) -> ml_collections.ConfigDict:
    """A config's ``learner`` group: every field of ``config`` (:func:`learner_config` reads it)."""
    return ml_collections.ConfigDict(
        {f.name: getattr(config, f.name) for f in dataclasses.fields(LearnerConfig)}
    )
