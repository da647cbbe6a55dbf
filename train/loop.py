"""The training loop: self-play, replay, learner steps, metrics, checkpoints, evaluation.

``train(config, workdir)`` runs AlphaGo Zero's loop on one process (or every
process of a multi-host job) from an ``ml_collections.ConfigDict`` (see
``configs/``)::

    iteration: self-play num_games games with the current params -> replay
               if the replay holds replay.min_size positions:
                   updates_per_iteration learner steps on sampled batches
               metrics -> metrics.jsonl, TensorBoard, plot; SGF of a few games
    until train.total_steps learner steps or train.max_minutes

Everything random derives from ``config.seed``: iteration ``i`` self-plays with
``fold_in(selfplay_key, i)`` and learner step ``s`` samples with
``fold_in(sample_key, s)``. A checkpoint (every ``train.checkpoint_every``
steps, at the end, on SIGTERM/SIGINT) holds the train state, the replay
contents and the counters (iteration, updates left in it), so a resumed run
continues exactly where the stopped one was: it produces the same losses as
a run that never stopped.

Workdir layout: ``checkpoints/<step>/``, ``metrics.jsonl``, ``tb/`` (TensorBoard
events), ``learning_curve.png``, ``eval.json``, ``sgf/iter_<i>/``, ``config.json``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from gojax.atomic import atomic_file, write_atomic
from gojax.search import KATAGO_PUCT_RANGES, SearchConfig
from train import model as model_lib
from train.checkpoint import Checkpointer, install_signal_handlers
from train.config_checks import check_run_config
from train.continuation import continue_from, write_lineage
from train.evaluation import GAMES_AXIS, play_arena, random_agent, search_agent, uct_agent
from train.learner import (
    LearnerConfig,
    abstract_train_state,
    check_finite,
    create_train_state,
    first_non_finite,
    make_mesh,
    make_train_step,
    shard_batch,
)
from train.provenance import record_start
from train.replay import ReplayBuffer
from train.selfplay import (
    PER_GAME_FIELDS,
    SelfPlayConfig,
    agz_encode,
    alphago_encode,
    play_games,
    trajectories_to_sgf,
)

__all__ = [
    "apply_overrides",
    "default_config",
    "incompatible_keys",
    "load_config",
    "plot_learning_curve",
    "train",
]

# Replay-free copies of the state every train.snapshot_every steps: <workdir>/snapshots/
# checkpoints/<step>, so that the folder reads as a run's workdir (sweeps, init_from).
SNAPSHOTS = Path("snapshots") / "checkpoints"

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


# ----------------------------------------------------------------------------
# Building the pieces from a config.


def _katago_encode(states) -> dict[str, jax.Array]:
    """KataGo features for the replay: ``spatial [B, N, N, 22]``, ``global [B, 19]`` float32."""
    spatial, global_features = model_lib.encode(model_lib.ModelSpec("tiny"), states)
    return {"global": global_features, "spatial": spatial}


@functools.cache
def _evaluator_fn(spec: model_lib.ModelSpec):
    """``variables -> Evaluator``; cached so that every call passes the same static object."""
    return functools.partial(model_lib.evaluator, spec, model_lib.build(spec))


def replay_encoder(spec: model_lib.ModelSpec) -> Callable:
    """How positions are stored for a ``spec`` net: ``[B]`` states -> its inputs
    (uint8 planes, or KataGo's features as a dict)."""
    if spec.is_katago:
        return _katago_encode
    return {"agz": agz_encode, "alphago": alphago_encode}[spec.encoder]


def selfplay_functions(spec: model_lib.ModelSpec) -> tuple[Callable, Callable]:
    """The static ``(evaluator_fn, encode_fn)`` that ``train.selfplay.play_games`` plays a
    ``spec`` net's games with, as the training loop does (the same objects every call)."""
    return _evaluator_fn(spec), replay_encoder(spec)


@functools.cache
def _train_step(spec: model_lib.ModelSpec, config: LearnerConfig, mesh):
    """One compiled train step per (spec, learner config, mesh), shared by runs in a process."""
    return make_train_step(spec, model_lib.build(spec), config, mesh)


def _search_config(s: ml_collections.ConfigDict, **play: Any) -> SearchConfig:
    """The ``selfplay`` group's search, with ``play`` overriding any of its fields
    (evaluation and gating: their own simulations, ``gumbel_scale`` and AlphaGo Zero's
    move temperature; they also drop the root's exploration,
    ``SearchConfig.without_root_exploration``)."""
    fields = dict(
        kind=s.search_kind,
        num_simulations=s.num_simulations,
        dirichlet_fraction=s.dirichlet_fraction,
        temperature_moves=s.temperature_moves,
        pb_c_init=s.pb_c_init,
        moves=s.moves,
        max_num_considered_actions=s.gumbel_considered,
        gumbel_scale=s.gumbel_scale,
        forced_playouts=s.forced_playouts,
        normalise_values=s.normalise_values,
        static_score_utility=s.static_score_utility,
        dynamic_score_utility=s.dynamic_score_utility,
        **{field: s[field] for field in KATAGO_PUCT_RANGES},
        root_policy_temperature=s.root_policy_temperature,
        root_policy_temperature_early=s.root_policy_temperature_early,
        move_temperature=s.move_temperature,
        move_temperature_early=s.move_temperature_early,
        temperature_halflife=s.temperature_halflife,
    )
    return SearchConfig(**{**fields, **play})


def selfplay_config(config: ml_collections.ConfigDict) -> SelfPlayConfig:
    """The ``SelfPlayConfig`` of a run config (``board`` and ``selfplay`` groups)."""
    b, s = config.board, config.selfplay
    return SelfPlayConfig(
        size=b.size,
        komi=b.komi,
        rules=b.rules,
        num_games=s.num_games,
        max_moves=b.max_moves or None,
        num_steps=s.num_steps or None,
        search=_search_config(s),
        resign_threshold=s.resign_threshold or None,
        no_resign_fraction=s.no_resign_fraction,
        fast_simulations=s.fast_simulations or None,
        full_search_prob=s.full_search_prob,
        num_devices=s.num_devices,
    )


def learner_group(config: LearnerConfig) -> ml_collections.ConfigDict:
    """A config's ``learner`` group: every field of ``config`` (:func:`learner_config` reads it)."""
    return ml_collections.ConfigDict(
        {f.name: getattr(config, f.name) for f in dataclasses.fields(LearnerConfig)}
    )


def learner_config(config: ml_collections.ConfigDict) -> LearnerConfig:
    """The ``LearnerConfig`` of a run config (its ``learner`` group, field by field)."""
    fields = {f.name for f in dataclasses.fields(LearnerConfig)}
    given = config.learner.to_dict()
    unknown = sorted(set(given) - fields)
    if unknown:
        raise ValueError(f"unknown learner keys {unknown}")
    return LearnerConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})


def _to_learner_batch(sample: dict[str, np.ndarray], spec: model_lib.ModelSpec) -> dict:
    """A replay sample as the learner's batch (inputs as the encoder's tuple)."""
    inputs = sample["inputs"]
    if spec.is_katago:
        inputs = (inputs["spatial"], inputs["global"])
    else:
        inputs = (inputs,)
    batch = {
        "inputs": inputs,
        "policy": sample["policy"],
        "policy_mask": sample["policy_mask"],
        "value": sample["value"],
        "value_mask": sample["value_mask"],
        "score": sample["score"],
        "ownership": sample["ownership"],
        "ownership_mask": sample["score_mask"],
    }
    if spec.opponent_policy:  # only then: the step's input shapes stay as they were
        batch["opponent_policy"] = sample["opponent_policy"]
        batch["opponent_policy_mask"] = sample["opponent_policy_mask"]
    if spec.short_term_heads:
        batch["td_value"] = sample["td_value"]
        batch["td_score"] = sample["td_score"]
    return batch


def _host_variables(state) -> dict[str, Any]:
    """Params and BN statistics as host arrays, for self-play and evaluation on one device."""
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        # tiled: the global value of each array (replicated or split over the mesh);
        # without it process_allgather refuses arrays that span other processes' devices.
        return multihost_utils.process_allgather(variables, tiled=True)
    return jax.device_get(variables)


def _across_processes(values: Sequence[int]) -> np.ndarray:
    """``[process_count, len(values)]``: every process's ``values`` (a collective in a
    multi-process job: every process must call it at the same point)."""
    local = np.asarray(values, np.int32)
    if jax.process_count() == 1:
        return local[None]
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(local))


def _past(deadline: float) -> bool:
    """Whether the time limit is reached, agreed by every process (each process stopping
    on its own clock would leave the others waiting in the next learner step)."""
    if deadline == math.inf:  # no limit: nothing to agree on (the same for every process)
        return False
    return bool(_across_processes([time.perf_counter() > deadline]).any())


def _first_games(traj, k: int):
    """The first ``k`` games of a batch of trajectories."""
    fields = {}
    for f in dataclasses.fields(traj):
        x = getattr(traj, f.name)
        if f.name in PER_GAME_FIELDS:
            fields[f.name] = jax.tree.map(lambda a: a[:k], x)
        else:
            fields[f.name] = jax.tree.map(lambda a: a[:, :k], x)
    return traj.replace(**fields)


# ----------------------------------------------------------------------------
# Metrics sinks.


# (title, metric keys) of the learning-curve plot's four panels; ``"group.*"``
# stands for every key under ``group.``.
LEARNING_CURVE_PANELS = (
    ("loss", ("learner.total_loss", "learner.policy_loss", "learner.value_loss")),
    ("policy entropy", ("learner.policy_entropy",)),
    ("value accuracy, evaluation win rates", ("learner.value_accuracy", "eval.*")),
    ("self-play moves/s", ("selfplay.moves_per_second",)),
)


def _series(records: Sequence[dict[str, Any]], keys) -> list[tuple[str, str]]:
    """``(metric key, label)`` pairs; ``"group.*"`` stands for every key under ``group.``."""
    out = []
    for key in keys:
        if key.endswith(".*"):
            prefix = key[:-1]
            found = sorted({k for r in records for k in r if k.startswith(prefix)})
            out.extend((k, k[len(prefix) :].removesuffix(".win_rate")) for k in found)
        else:
            out.append((key, key.split(".")[-1]))
    return out


def plot_learning_curve(
    records: Sequence[dict[str, Any]],
    path: str | os.PathLike,
    *,
    panels: Sequence[tuple[str, Sequence[str]]] = LEARNING_CURVE_PANELS,
) -> None:
    """Plot ``metrics.jsonl`` records (dicts with a ``step``) as a 2x2 PNG, written atomically.

    ``panels`` are four ``(title, metric keys)``; a missing or null value is
    left out of its line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (title, keys) in zip(axes.flat, panels, strict=True):
        series = _series(records, keys)
        for key, label in series:
            pts = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            if pts:  # a marker, so that a single evaluation shows
                marker = "o" if len(pts) < 4 else None
                ax.plot(*zip(*pts, strict=True), label=label, marker=marker)
        ax.set_title(title)
        ax.set_xlabel("learner step")
        ax.grid(alpha=0.3)
        if len(series) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    try:
        with atomic_file(path, "wb") as handle:
            fig.savefig(handle, format="png", dpi=80)
    finally:
        plt.close(fig)


class _Metrics:
    """metrics.jsonl (appended, flushed), TensorBoard events and the PNG plot."""

    PANELS = LEARNING_CURVE_PANELS

    def __init__(self, workdir: Path, enabled: bool, panels=None):
        self.workdir = workdir
        self.enabled = enabled
        self.panels = panels or self.PANELS
        self.records: list[dict[str, Any]] = []
        self.path = workdir / "metrics.jsonl"
        self.tb = None
        if not enabled:
            return
        if self.path.exists():  # a resumed run plots its whole history
            with open(self.path) as f:
                self.records = [json.loads(line) for line in f if line.strip()]
        try:
            from tensorboardX import SummaryWriter

            self.tb = SummaryWriter(str(workdir / "tb"))
        except ImportError:  # metrics.jsonl still has everything
            self.tb = None

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.records.append(record)
        with open(self.path, "a") as f:
            # Strict JSON: NaN (e.g. no resignations yet) is written as null.
            clean = {
                k: None if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in record.items()
            }
            f.write(json.dumps(clean) + "\n")
            f.flush()
        if self.tb is not None:
            step = int(record["step"])
            for k, v in record.items():
                if isinstance(v, int | float) and math.isfinite(v) and k != "step":
                    self.tb.add_scalar(k.replace(".", "/"), v, step)
            self.tb.flush()

    def plot(self) -> None:
        if not self.enabled or not self.records:
            return
        plot_learning_curve(self.records, self.workdir / "learning_curve.png", panels=self.panels)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


# ----------------------------------------------------------------------------
# Evaluation.


def evaluate(
    config: ml_collections.ConfigDict,
    state,
    key: jax.Array,
    workdir: Path | None = None,
    variables: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The net with a small search against random play and UCT at equal simulations.

    Writes ``workdir/eval.json`` when ``workdir`` is given and prints a table.
    Returns one row per opponent: ``opponent, games, wins, losses, draws,
    win_rate, ci95``. ``variables``: the state's parameters on the host, when
    the caller gathered them already (in a multi-process job every process must
    take part in that gather, while only one evaluates).
    """
    e, b = config.eval, config.board
    spec = model_lib.spec_from_config(config.model)
    search_config = _search_config(
        config.selfplay,
        num_simulations=e.num_simulations,
        temperature_moves=e.temperature_moves,
        move_temperature=None,  # evaluation's own temperature_moves
        move_temperature_early=None,
        gumbel_scale=e.gumbel_scale,
    ).without_root_exploration()
    if variables is None:
        variables = _host_variables(state)
    net = search_agent(spec, model_lib.build(spec), variables, search_config)
    # The UCT baseline searches the same move set as the net: equal knowledge of Go.
    uct = uct_agent(e.num_simulations, moves=config.selfplay.moves)
    opponents = {"random": random_agent(), f"uct{e.num_simulations}": uct}
    # The games are split over this process's devices; an arena game does not depend on
    # how the games are split (tests/test_arena.py), so neither do the results.
    local = jax.local_devices()
    mesh = jax.sharding.Mesh(np.asarray(local), (GAMES_AXIS,)) if len(local) > 1 else None
    rows = []
    for i, (name, opponent) in enumerate(opponents.items()):
        result = play_arena(
            net,
            opponent,
            jax.random.fold_in(key, i),
            size=b.size,
            num_games=e.num_games,
            komi=b.komi,
            rules=b.rules,
            max_moves=b.max_moves or None,
            mesh=mesh,
        )
        rows.append({"opponent": name, **result.summary()})
    lines = [f"{'opponent':<10} {'games':>5} {'wins':>5} {'win rate':>8}  95% CI"]
    for r in rows:
        lo, hi = r["ci95"]
        lines.append(
            f"{r['opponent']:<10} {r['games']:>5} {r['wins']:>5} {r['win_rate']:>8.3f}"
            f"  [{lo:.3f}, {hi:.3f}]"
        )
    print("\n".join(lines))
    if workdir is not None:
        step = int(jax.device_get(state.step))
        report = json.dumps({"step": step, "results": rows}, indent=2) + "\n"
        write_atomic(workdir / "eval.json", report)
    return rows


def gate_candidate(config: ml_collections.ConfigDict, candidate, best, key: jax.Array):
    """AlphaGo Zero's gate (``train.gating.gate``): the learner's net against the best one.

    Both search with ``gating.num_simulations`` (no noise, the most visited
    move) over ``gating.num_games`` games; returns the ``GateResult``.
    """
    from train.agents import search_agent as arena_search_agent
    from train.gating import gate

    g, b = config.gating, config.board
    spec = model_lib.spec_from_config(config.model)
    search_config = _search_config(
        config.selfplay,
        num_simulations=g.num_simulations,
        temperature_moves=0,
        move_temperature=None,  # the best move
        move_temperature_early=None,
        gumbel_scale=0.0,
    ).without_root_exploration()
    return gate(
        arena_search_agent(spec, candidate, search_config, name="candidate"),
        arena_search_agent(spec, best, search_config, name="best"),
        key,
        num_games=g.num_games,
        threshold=g.threshold,
        size=b.size,
        komi=b.komi,
        rules=b.rules,
        max_moves=b.max_moves or None,
    )


# ----------------------------------------------------------------------------
# The loop.


def train(config: ml_collections.ConfigDict, workdir: str | os.PathLike) -> dict[str, Any]:
    """Train from ``config`` in ``workdir`` (resuming from its newest checkpoint).

    Returns a summary: ``step``, ``iteration``, ``games``, ``replay_size``,
    ``resumed_from`` (step or None), ``stopped`` (``"total_steps"`` or
    ``"max_minutes"``), ``losses`` (total loss of every learner step this
    call ran, in order), ``eval`` (the final evaluation rows, or None).
    Raises ``ValueError`` if the checkpoint's config differs in keys other
    than ``train.*`` and ``eval.*``.
    """
    check_run_config(config)  # before anything is written
    workdir = Path(workdir)
    chief = jax.process_index() == 0
    workdir.mkdir(parents=True, exist_ok=True)
    t = config.train
    spec = model_lib.spec_from_config(config.model)
    sp_config = selfplay_config(config)
    lconfig = learner_config(config)
    mesh = make_mesh(lconfig)
    step_fn = _train_step(spec, lconfig, mesh)
    evaluator_fn, encode_fn = selfplay_functions(spec)
    config_json = config_to_json(config)

    root = jax.random.PRNGKey(config.seed)
    key_init, key_selfplay, key_sample, key_eval = jax.random.split(root, 4)
    key_gate = jax.random.fold_in(root, 1)
    gating = config.gating.every_iterations > 0
    # Each host plays its own games and samples its own slice of the batch.
    key_selfplay = jax.random.fold_in(key_selfplay, jax.process_index())
    key_sample = jax.random.fold_in(key_sample, jax.process_index())
    local_batch = lconfig.batch_size // jax.process_count()

    ckpt = Checkpointer(
        workdir / "checkpoints", save_every=t.checkpoint_every, keep=t.keep_checkpoints
    )
    snapshots = (
        Checkpointer(workdir / SNAPSHOTS, save_every=t.snapshot_every, keep=2**31 - 1)
        if t.snapshot_every
        else None
    )
    replay = ReplayBuffer(config.replay.capacity)
    # Check the config before restoring: a different net would fail to restore
    # and read as a damaged checkpoint, and the run would silently start afresh.
    latest = ckpt.latest_step()
    if latest is not None:
        _check_resumable(_saved_config(ckpt.directory, latest), config_json, workdir, latest)
    template = abstract_train_state(spec, lconfig, sp_config.size, mesh)
    restored = ckpt.restore_latest(template)
    # Cumulative over the run's whole lineage (continuations included): the compute
    # behind its nets. cpu_seconds is this process's (every thread's) CPU time.
    counters = {
        "iteration": 0,
        "pending_updates": 0,
        "games": 0,
        "positions": 0,
        "cpu_seconds": 0.0,
        "wall_seconds": 0.0,
    }
    best = None  # with gating: the variables self-play uses
    lineage: list[dict[str, Any]] = []
    if restored is None and latest is None and t.init_from:
        restored = continue_from(t.init_from, template, config_json)
        state, lineage = restored.state, restored.info["lineage"]
        for k, v in restored.info.get("counters", {}).items():
            if k in counters and k != "pending_updates":  # the new replay fills first
                counters[k] = type(counters[k])(v)
        if chief:
            write_lineage(workdir, lineage)
        resumed_from = None
    elif restored is None:
        if latest is not None:
            raise ValueError(f"{ckpt.directory}: no checkpoint could be restored (see warnings)")
        state = create_train_state(spec, lconfig, key_init, sp_config.size, mesh)
        resumed_from = None
    else:
        lineage = list(restored.info.get("lineage", []))
        _check_resumable(restored.config, config_json, workdir, restored.step)
        state = restored.state
        extra = restored.extra or {}
        replay.load_state_dict({k: v for k, v in extra.get("replay", {}).items()})
        best = extra.get("best")
        for k in counters:
            if k in extra.get("counters", {}):
                counters[k] = type(counters[k])(extra["counters"][k])
        resumed_from = restored.step
    if gating and best is None:
        best = _host_variables(state)  # the first network is the first best
    if chief:
        # The step it starts from: a continuation's (train.init_from) is its source's.
        record_start(workdir, config_json, int(jax.device_get(state.step)))

    def info() -> dict[str, Any]:
        """What a checkpoint or snapshot carries beside the state: counters, lineage."""
        return {"counters": dict(counters), "lineage": lineage}

    def save(force: bool, pending: Sequence[dict[str, Any]] = ()) -> None:
        """A checkpoint if one is due (or ``force``), of a finite state only: a
        non-finite loss among ``pending`` (this iteration's steps so far) or value in the
        state stops the run before anything is written, so the newest checkpoint stays
        the newest finite one."""
        step = int(jax.device_get(state.step))
        if not (force or ckpt.should_save(step)):
            return
        if pending:
            host = jax.device_get(list(pending))
            check_finite({k: np.stack([m[k] for m in host]) for k in host[0]}, step=step)
        _check_state_finite(state, step, ckpt)
        count_time()
        extra = {
            "replay": replay.state_dict(),
            "counters": {k: np.asarray(v) for k, v in counters.items()},
            **({"best": best} if gating else {}),
        }
        ckpt.save(step, state, extra=extra, config=config_json, info=info(), force=force)

    def snapshot() -> None:
        step = int(jax.device_get(state.step))
        if snapshots is not None and snapshots.should_save(step):
            _check_state_finite(state, step, snapshots)
            count_time()
            snapshots.save(step, state, config=config_json, info=info())

    guard = install_signal_handlers(lambda signum: (save(True), ckpt.close()), defer=True)

    def evaluate_now() -> list[dict[str, Any]] | None:
        """The chief evaluates the current net and records it; returns its rows (None
        elsewhere). Every process takes part in gathering the parameters (a collective)."""
        variables = _host_variables(state)
        if not chief:
            return None
        rows = evaluate(config, state, jax.random.fold_in(key_eval, step), workdir, variables)
        metrics_out.write(_eval_record(rows, step))
        return rows

    metrics_out = _Metrics(workdir, enabled=chief)
    start = time.perf_counter()
    deadline = start + 60.0 * t.max_minutes if t.max_minutes else math.inf
    step = int(jax.device_get(state.step))
    losses: list[float] = []
    clock = [time.perf_counter(), time.process_time()]  # when the counters last grew

    def count_time() -> None:
        now = [time.perf_counter(), time.process_time()]
        counters["wall_seconds"] += now[0] - clock[0]
        counters["cpu_seconds"] += now[1] - clock[1]
        clock[:] = now

    bar = None
    if chief and t.progress:
        from tqdm import tqdm

        bar = tqdm(total=t.total_steps, initial=step, unit="step", dynamic_ncols=True)
    try:
        while step < t.total_steps:
            if _past(deadline):
                break
            record: dict[str, Any] = {}
            iteration = counters["iteration"]
            if counters["pending_updates"] == 0:
                # Self-play a batch with the current params.
                variables = best if gating else _host_variables(state)
                traj, stats = play_games(
                    evaluator_fn,
                    encode_fn,
                    variables,
                    jax.random.fold_in(key_selfplay, iteration),
                    sp_config,
                )
                added = replay.add(traj)
                # Every host's games count, and the learner starts when every host's
                # replay is big enough: its steps are collectives all hosts must join.
                finished, added, replay_size = _across_processes(
                    [int(stats["games_finished"]), added, len(replay)]
                ).T
                if finished.sum() == 0:
                    # Unfinished games give no targets: the run would self-play forever.
                    raise ValueError(
                        f"no self-play game ended within selfplay.num_steps={sp_config.steps} "
                        "moves; raise it, or set 0 to play whole games"
                    )
                counters["games"] += int(finished.sum())
                counters["positions"] += int(added.sum())
                record.update({f"selfplay.{k}": v for k, v in stats.items()})
                record["selfplay.games_per_second"] = stats["games"] / max(stats["seconds"], 1e-9)
                if chief and t.sgf_games > 0:
                    _write_sgf(traj, sp_config, workdir / "sgf", iteration, t)
                counters["iteration"] = iteration + 1
                if replay_size.min() >= config.replay.min_size:
                    counters["pending_updates"] = t.updates_per_iteration
            # Learner steps (possibly the rest of an iteration a stop interrupted).
            step_metrics = []
            learn_start = time.perf_counter()
            while counters["pending_updates"] > 0 and step < t.total_steps:
                sample = replay.sample(
                    jax.random.fold_in(key_sample, step),
                    local_batch,
                    one_per_game=config.replay.one_per_game,
                    augment=config.replay.augment,
                )
                batch = shard_batch(_to_learner_batch(sample, spec), mesh)
                state, metrics = step_fn(state, batch)
                step += 1
                counters["pending_updates"] -= 1
                step_metrics.append(metrics)
                every_gate = config.gating.every_iterations
                if gating and counters["pending_updates"] == 0:
                    if counters["iteration"] % every_gate == 0:
                        # Before the save: a checkpoint here must hold the decision.
                        candidate = _host_variables(state)
                        key = jax.random.fold_in(key_gate, counters["iteration"])
                        outcome = gate_candidate(config, candidate, best, key)
                        if outcome.promoted:
                            best = candidate
                        record["gating.win_rate"] = outcome.win_rate
                        record["gating.promoted"] = float(outcome.promoted)
                if bar is not None:
                    bar.update(1)
                save(False, step_metrics)
                snapshot()
                guard.check()
                if _past(deadline):
                    break
            if step_metrics:
                host = jax.device_get(step_metrics)
                check_finite({k: np.stack([m[k] for m in host]) for k in host[0]}, step=step)
                seconds = time.perf_counter() - learn_start
                losses.extend(float(m["total_loss"]) for m in host)
                for k in host[0]:
                    record[f"learner.{k}"] = float(np.mean([m[k] for m in host]))
                record["learner.samples_per_second"] = len(host) * lconfig.batch_size / seconds
                record["learner.steps"] = len(host)
                record["learner.seconds"] = seconds
                if bar is not None:
                    bar.set_postfix(loss=f"{record['learner.total_loss']:.3f}", refresh=False)
            count_time()
            record.update(
                step=step,
                iteration=counters["iteration"],
                games=counters["games"],
                positions=counters["positions"],
                cpu_hours=counters["cpu_seconds"] / 3600,
                wall_hours=counters["wall_seconds"] / 3600,
                replay_size=len(replay),
                replay_bytes=replay.nbytes,
                wall_seconds=time.perf_counter() - start,
            )
            metrics_out.write(record)
            if t.plot_every and counters["iteration"] % t.plot_every == 0:
                metrics_out.plot()
            every = config.eval.every_iterations
            if every and config.eval.num_games and counters["iteration"] % every == 0:
                evaluate_now()
            guard.check()
        stopped = "total_steps" if step >= t.total_steps else "max_minutes"
        save(True)
        ckpt.wait()
    finally:
        guard.uninstall()
        if bar is not None:
            bar.close()
    rows = evaluate_now() if config.eval.num_games > 0 else None
    metrics_out.plot()
    metrics_out.close()
    ckpt.close()
    if snapshots is not None:
        snapshots.close()
    return {
        "step": step,
        "iteration": counters["iteration"],
        "games": counters["games"],
        "replay_size": len(replay),
        "resumed_from": resumed_from,
        "stopped": stopped,
        "losses": losses,
        "eval": rows,
    }


def _check_state_finite(state, step: int, ckpt: Checkpointer) -> None:
    """Raise ``FloatingPointError`` naming the first non-finite part of the train state
    (parameters, BatchNorm statistics, optimiser state), which is then not saved."""
    bad = first_non_finite((state.params, state.batch_stats, state.opt_state))
    if bad is not None:
        newest = ckpt.latest_step()
        kept = f"the newest checkpoint is still step {newest}" if newest is not None else "none"
        raise FloatingPointError(
            f"training stopped at step {step}: the train state holds NaN or inf in "
            f"{bad}; not saved ({kept})"
        )


def _eval_record(rows: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """Evaluation rows as a metrics record: ``eval.<opponent>.win_rate`` at ``step``."""
    return {"step": step, **{f"eval.{r['opponent']}.win_rate": r["win_rate"] for r in rows}}


def _write_sgf(traj, sp_config: SelfPlayConfig, folder: Path, iteration: int, t) -> None:
    """A few games of this iteration under ``sgf/iter_<i>/``; only the newest folders kept."""
    k = min(t.sgf_games, sp_config.num_games)
    trajectories_to_sgf(_first_games(traj, k), sp_config, folder / f"iter_{iteration:06d}")
    kept = sorted(p for p in folder.iterdir() if p.name.startswith("iter_"))
    for old in kept[: max(0, len(kept) - t.sgf_keep_iterations)]:
        shutil.rmtree(old, ignore_errors=True)
