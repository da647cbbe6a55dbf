"""Supervised learning from game records: AlphaGo's SL policy network, value from results.

``gojax train-sl --config configs/sl_go9.py --workdir runs/sl`` streams a
folder of SGF files through the self-play learner: the same models, losses,
optimisers, sharded train step, checkpoints, metrics and plot as ``gojax
train``. Only where the examples come from differs:

* every move of a game is a policy target (one-hot on the move played) and,
  when ``RE[]`` names a winner, a value target (+1 for the side that won);
  with ``model.opponent_policy`` the move after it is the reply target;
* games are replayed with the exact rules (``RU[]`` if the file names one,
  else ``board.rules``) in one jitted ``lax.scan`` per game, and encoded as
  the model's inputs (AlphaGo Zero planes or KataGo features);
* a file that does not parse, is of another board size, has no moves, places
  stones in mid-game or contains an illegal move is skipped with a warning
  (and counted); the run stops with an error only when no file is usable;
* positions go through a window (``ReplayBuffer``) that is sampled
  uniformly with the 8 symmetries -- a streaming shuffle: each position is
  drawn ``data.samples_per_position`` times on average;
* the first ``data.holdout_games`` usable files, in sorted order (the last
  with ``data.holdout_from="last"``: a self-play run's newest games), are never
  trained on: policy top-1 accuracy, policy loss and value MSE on them are
  the run's evaluation (AlphaGo's SL net predicted 57% of expert moves).

Resume: checkpoints hold the train state, the window's contents and the
stream's place (epoch and file), so a restarted run continues where the
last checkpoint was taken. Files are read in a shuffled order that depends on
``seed`` and the epoch only.
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
import types
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from gojax import GoState, legal_moves, play, sgf
from gojax.atomic import write_atomic
from gojax.games import rules_of_record, state_at
from train import model as model_lib
from train.checkpoint import Checkpointer, install_signal_handlers
from train.config_checks import (
    KeyRanges,
    bad_value,
    check_board,
    check_choice,
    check_keys,
    check_learner,
    check_ranges,
)
from train.learner import (
    LearnerConfig,
    abstract_train_state,
    check_finite,
    create_train_state,
    make_mesh,
    shard_batch,
)
from train.loop import (
    _check_resumable,
    _Metrics,
    _saved_config,
    _to_learner_batch,
    _train_step,
    config_to_json,
    learner_config,
    learner_group,
    replay_encoder,
)
from train.provenance import record_start

__all__ = [
    "check_config",
    "default_sl_config",
    "game_examples",
    "sgf_files",
    "SGFStream",
    "SL_RANGES",
    "train_sl",
]


def default_sl_config() -> ml_collections.ConfigDict:
    """Every key an SL config has; ``configs/sl_*.py`` start from this.

    Groups: ``board`` (size of the games used; rules and komi for files that
    do not say), ``model``, ``data`` (the SGF folder and the stream),
    ``learner`` (``LearnerConfig``'s fields), ``train`` (length, saving,
    logging, held-out evaluation).
    """
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.board = ml_collections.ConfigDict(dict(size=19, komi=7.5, rules="chinese"))
    # opponent_policy (KataGo presets): the reply target is the next move played.
    c.model = ml_collections.ConfigDict(
        dict(preset="agz_tiny", dtype="float32", opponent_policy=False, activation="")
    )
    c.data = ml_collections.ConfigDict(
        dict(
            sgf_dir="",  # required: a folder searched recursively for *.sgf
            holdout_games=16,  # usable files kept out of training for evaluation
            holdout_from="first",  # or "last": which end of the sorted files is held out
            window=200_000,  # positions held for sampling (the shuffle window)
            min_size=2_000,  # positions read before the first learner step
            games_per_chunk=16,  # files read between two bursts of learner steps
            samples_per_position=4.0,  # learner samples per position read (on average)
            augment=True,  # a random one of the 8 symmetries per sample
        )
    )
    c.learner = learner_group(
        LearnerConfig(optimizer="adamw", learning_rate=1e-3, warmup_steps=100)
    )
    c.train = ml_collections.ConfigDict(
        dict(
            total_steps=1_000,
            max_minutes=0.0,  # 0: no time limit
            checkpoint_every=200,
            keep_checkpoints=3,
            eval_every=200,  # learner steps between held-out evaluations (0: only at the end)
            plot_every=50,
            progress=True,
        )
    )
    return c


# The numeric keys of an SL config (the learner's: ``check_learner``).
SL_RANGES = KeyRanges(
    at_least_one=(
        "data.window",
        "data.games_per_chunk",
        "train.total_steps",
        "train.checkpoint_every",
        "train.keep_checkpoints",
    ),
    at_least_zero=(
        "seed",
        "data.holdout_games",
        "data.min_size",
        "train.max_minutes",
        "train.eval_every",
        "train.plot_every",
    ),
    positive=("data.samples_per_position",),
)


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` naming the first unknown key or bad value of a ``gojax
    train-sl`` config (before anything is read or written)."""
    check_keys(config, default_sl_config())
    check_board(config)
    check_ranges(config, SL_RANGES)
    check_choice(config, "data.holdout_from", HOLDOUT_ENDS)
    check_learner(config)
    d = config.data
    if d.min_size > d.window:  # the window never fills that far: the learner never starts
        raise bad_value("data.min_size", d.min_size, f"at most data.window ({d.window})")
    model_lib.spec_from_config(config.model)
    learner_config(config)


# ----------------------------------------------------------------------------
# Reading games.


def sgf_files(root: str | os.PathLike[str]) -> list[Path]:
    """Every ``*.sgf`` under ``root`` (recursively), sorted; ValueError if there is none."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder of SGF files")
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() == ".sgf" and p.is_file())
    if not files:
        raise ValueError(f"{root}: no .sgf files found")
    return files


def _pad_length(moves: int) -> int:
    """Games are padded to a multiple of 64 moves: a few compiled replays serve every length."""
    return max(64, -(-moves // 64) * 64)


@functools.partial(jax.jit, static_argnames="encode_fn")
def _replay(encode_fn, start: GoState, actions: jax.Array, colours: jax.Array):
    """Replay ``actions [T]`` (``colours [T]``: +1/-1 mover, 0 = padding) from ``start``.

    Returns ``(inputs [T, ...], legal [T] bool, to_play [T] int8)``: the
    encoding of each position before its move, whether the move was legal
    there, and the mover. A move by the player not to move first hands
    them the turn (as GTP does with handicap stones given as moves).
    """

    def step(state, xs):
        action, colour = xs
        live = colour != 0
        turn = live & (state.to_play != colour)
        state = state.replace(
            to_play=jnp.where(live, colour, state.to_play).astype(jnp.int8),
            ko=jnp.where(turn, -1, state.ko).astype(state.ko.dtype),
        )
        legal = legal_moves(state)[action] | ~live
        after = play(state, action)
        keep = live & legal
        following = jax.tree.map(lambda a, b: jnp.where(keep, a, b), after, state)
        return following, (state, legal)

    states, legal = jax.lax.scan(step, start, (actions, colours))[1]
    return encode_fn(states), legal, states.to_play


def game_examples(
    record: sgf.GameRecord, encode_fn, *, default_rules: str
) -> dict[str, np.ndarray]:
    """Training examples of every move of ``record``, host arrays with leading axis ``T``.

    Keys: ``inputs`` (the encoder's output), ``action [T]``, ``to_play [T]``,
    ``value [T]`` (the result for the mover, 0 without one) and
    ``has_value`` (a bool: ``RE`` names a winner or a draw). Raises
    ``ValueError`` naming the problem for a game that cannot be used.
    """
    moves = [node for node in record.nodes if node.color is not None]
    if not moves:
        raise ValueError("no moves")
    first_move = next(i for i, node in enumerate(record.nodes) if node.color is not None)
    if any(n.add_black or n.add_white or n.add_empty for n in record.nodes[first_move:]):
        raise ValueError("stones placed in mid-game")
    rules = rules_of_record(record, default_rules)
    start = state_at(record, move=0, rules=rules)
    # Room in the superko history (and the move cap) for every move of the game.
    if start.max_moves < len(moves) + 1:
        raise ValueError(f"{len(moves)} moves: longer than the {start.max_moves}-move cap")
    length = _pad_length(len(moves))
    actions = np.full(length, record.size * record.size, np.int32)
    colours = np.zeros(length, np.int8)
    actions[: len(moves)] = [node.action for node in moves]
    colours[: len(moves)] = [1 if node.color == "B" else -1 for node in moves]
    inputs, legal, to_play = jax.device_get(
        _replay(encode_fn, start, jnp.asarray(actions), jnp.asarray(colours))
    )
    bad = np.flatnonzero(~legal)
    if bad.size:
        raise ValueError(f"move {bad[0] + 1} is illegal under {rules} rules")
    n = len(moves)
    winner = sgf.result_winner(record.result)
    to_play = to_play[:n]
    return {
        "inputs": jax.tree.map(lambda x: x[:n], inputs),
        "action": actions[:n],
        "to_play": to_play,
        "value": (to_play * (winner or 0)).astype(np.float32),
        "has_value": winner is not None,
    }


def _as_trajectories(game: dict[str, np.ndarray], size: int) -> Any:
    """One game as the ``[T, 1]`` time-major fields ``ReplayBuffer.add`` reads."""
    n = game["action"].shape[0]
    points = size * size
    policy = np.zeros((n, points + 1), np.float32)
    policy[np.arange(n), game["action"]] = 1.0
    column = lambda x: np.asarray(x)[:, None]  # noqa: E731
    return types.SimpleNamespace(
        inputs=jax.tree.map(column, game["inputs"]),
        policy=policy[:, None],
        policy_mask=np.ones((n, 1), bool),
        valid=np.ones((n, 1), bool),
        # Positions without a result stay out: the window serves value targets too.
        value_mask=np.full((n, 1), game["has_value"]),
        value=column(game["value"]),
        score=np.zeros((n, 1), np.float32),
        score_mask=np.zeros((n, 1), bool),
        ownership=np.zeros((n, 1, points), np.int8),
        to_play=column(game["to_play"]),
    )


class SGFStream:
    """Usable games from a list of SGF files, epoch after epoch, with a resumable cursor.

    Epoch ``e`` visits the files in a permutation drawn from ``(seed, e)``.
    Unusable files are reported once (``warnings.warn`` with the file and
    the reason) and remembered, so later epochs skip them silently.
    """

    def __init__(self, files, encode_fn, *, size: int, default_rules: str, seed: int):
        self.files = list(files)
        self.encode_fn = encode_fn
        self.size = size
        self.default_rules = default_rules
        self.seed = seed
        self.epoch = 0
        self.index = 0  # position in the epoch's permutation
        self.skipped: dict[str, str] = {}
        self.used = 0
        self._order_for: tuple[int, list] | None = None  # (epoch, files) of _order_cache
        self._order_cache = np.zeros(0, np.int64)

    def _order(self) -> np.ndarray:
        """This epoch's file order, drawn once per epoch (not once per game)."""
        epoch, files = self._order_for or (None, None)
        if epoch != self.epoch or files is not self.files:  # identity: no list comparison
            rng = np.random.default_rng([self.seed, self.epoch])
            self._order_for = (self.epoch, self.files)
            self._order_cache = rng.permutation(len(self.files))
        return self._order_cache

    def load(self, path: Path) -> dict[str, np.ndarray] | None:
        """The examples of one file, or None (with a warning the first time) if unusable."""
        key = str(path)
        if key in self.skipped:
            return None
        try:
            record = sgf.load(path)
            if record.size != self.size:
                raise ValueError(f"board size {record.size}, not {self.size}")
            game = game_examples(record, self.encode_fn, default_rules=self.default_rules)
        except (ValueError, OSError) as error:  # SGFError is a ValueError
            self.skipped[key] = str(error)
            warnings.warn(f"skipping {path}: {error}", stacklevel=2)
            return None
        self.used += 1
        return game

    def next_game(self) -> dict[str, np.ndarray]:
        """The next usable game; ValueError if a whole epoch had none."""
        tried = 0
        while True:
            if self.index >= len(self.files):
                self.epoch, self.index = self.epoch + 1, 0
            path = self.files[self._order()[self.index]]
            self.index += 1
            game = self.load(path)
            if game is not None:
                return game
            tried += 1
            if tried > len(self.files):
                raise ValueError("none of the training files is usable (see the warnings)")

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"epoch": np.asarray(self.epoch), "index": np.asarray(self.index)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


# ----------------------------------------------------------------------------
# Held-out evaluation.


HOLDOUT_ENDS = ("first", "last")


def _holdout(
    files, stream: SGFStream, count: int, end: str = "first"
) -> tuple[list[Path], list[dict]]:
    """The first (or ``end="last"``: last) ``count`` usable files of ``files`` and their
    games; the rest, in their order, train."""
    if end not in HOLDOUT_ENDS:
        raise ValueError(f"data.holdout_from must be one of {HOLDOUT_ENDS}, not {end!r}")
    held, games, rest = [], [], []
    for path in files if end == "first" else reversed(files):
        if len(held) < count:
            game = stream.load(path)
            if game is not None:
                held.append(path)
                games.append(game)
                continue
        rest.append(path)
    return (rest if end == "first" else rest[::-1]), games


def _stack_games(games: list[dict]) -> dict[str, Any]:
    """The held-out games as one learner batch (no augmentation)."""
    inputs = jax.tree.map(lambda *x: np.concatenate(x), *[g["inputs"] for g in games])
    action = np.concatenate([g["action"] for g in games])
    value = np.concatenate([g["value"] for g in games])
    has_value = np.concatenate([np.full(g["action"].shape, g["has_value"]) for g in games])
    return {"inputs": inputs, "action": action, "value": value, "value_mask": has_value}


@functools.partial(jax.jit, static_argnames=("spec", "module"))
def _holdout_metrics(spec, module, variables, inputs, action, value, value_mask):
    out = model_lib.forward(spec, module, variables, inputs, train=False)
    logp = jax.nn.log_softmax(out["policy_logits"].astype(jnp.float32))
    rows = jnp.arange(action.shape[0])
    weight = value_mask.astype(jnp.float32)
    return {
        "correct": jnp.sum(jnp.argmax(logp, axis=-1) == action),
        "policy_loss": -jnp.sum(logp[rows, action]),
        "value_se": jnp.sum(weight * (out["value"] - value) ** 2),
        "value_count": jnp.sum(weight),
    }


def evaluate_holdout(spec, module, variables, held: dict[str, Any], chunk: int = 512) -> dict:
    """Top-1 move accuracy, policy cross-entropy and value MSE over the held-out positions."""
    n = held["action"].shape[0]
    totals: dict[str, float] = {}
    for lo in range(0, n, chunk):
        sl = slice(lo, min(n, lo + chunk))
        inputs = _model_inputs(spec, jax.tree.map(lambda x, sl=sl: x[sl], held["inputs"]))
        part = _holdout_metrics(
            spec,
            module,
            variables,
            inputs,
            held["action"][sl],
            held["value"][sl],
            held["value_mask"][sl],
        )
        for k, v in jax.device_get(part).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    return {
        "positions": float(n),
        "accuracy": totals["correct"] / n,
        "policy_loss": totals["policy_loss"] / n,
        "value_mse": totals["value_se"] / max(totals["value_count"], 1.0),
    }


def _model_inputs(spec, inputs) -> tuple:
    """Stored inputs (one array, or KataGo's dict) as the model's float32 argument tuple."""
    if spec.is_katago:
        return (inputs["spatial"].astype(np.float32), inputs["global"].astype(np.float32))
    return (np.asarray(inputs, np.float32),)


# ----------------------------------------------------------------------------
# The loop.

# The learning-curve plot's panels (see ``train.loop._Metrics``).
SL_PANELS = (
    ("loss", ("learner.total_loss", "learner.policy_loss", "learner.value_loss")),
    ("held-out move accuracy", ("holdout.accuracy",)),
    ("held-out value MSE", ("holdout.value_mse",)),
    ("positions read /s", ("data.positions_per_second",)),
)


def train_sl(config: ml_collections.ConfigDict, workdir: str | os.PathLike) -> dict[str, Any]:
    """Supervised training from ``config.data.sgf_dir`` in ``workdir`` (resuming if possible).

    Returns ``step``, ``stopped`` (``"total_steps"`` or ``"max_minutes"``),
    ``games_read``, ``skipped`` (files), ``resumed_from`` and ``holdout``
    (the last held-out evaluation).
    """
    from train.replay import ReplayBuffer

    check_config(config)
    workdir = Path(workdir)
    if not config.data.sgf_dir:
        raise ValueError("data.sgf_dir is not set (--config.data.sgf_dir=FOLDER)")
    files = sgf_files(config.data.sgf_dir)
    workdir.mkdir(parents=True, exist_ok=True)
    t, d = config.train, config.data
    spec = model_lib.spec_from_config(config.model)
    module = model_lib.build(spec)
    lconfig = learner_config(config)
    mesh = make_mesh(lconfig)
    step_fn = _train_step(spec, lconfig, mesh)
    encode_fn = replay_encoder(spec)
    config_json = config_to_json(config)
    key_init, key_sample = jax.random.split(jax.random.PRNGKey(config.seed))

    stream = SGFStream(
        files, encode_fn, size=config.board.size, default_rules=config.board.rules, seed=config.seed
    )
    train_files, held_games = _holdout(files, stream, d.holdout_games, d.holdout_from)
    stream.files = train_files
    if not train_files:
        raise ValueError(f"{config.data.sgf_dir}: no files left to train on after the hold-out")
    held = _stack_games(held_games) if held_games else None

    ckpt = Checkpointer(
        workdir / "checkpoints", save_every=t.checkpoint_every, keep=t.keep_checkpoints
    )
    window = ReplayBuffer(d.window)
    latest = ckpt.latest_step()
    if latest is not None:
        _check_resumable(_saved_config(ckpt.directory, latest), config_json, workdir, latest)
    restored = ckpt.restore_latest(abstract_train_state(spec, lconfig, config.board.size, mesh))
    games_read, pending = 0, 0
    if restored is None:
        if latest is not None:
            raise ValueError(f"{ckpt.directory}: no checkpoint could be restored (see warnings)")
        state = create_train_state(spec, lconfig, key_init, config.board.size, mesh)
        resumed_from = None
    else:
        _check_resumable(restored.config, config_json, workdir, restored.step)
        state, extra = restored.state, restored.extra or {}
        window.load_state_dict(extra.get("window", {}))
        stream.load_state_dict(extra["stream"])
        games_read, pending = int(extra["games_read"]), int(extra["pending"])
        resumed_from = restored.step
    record_start(workdir, config_json, resumed_from or 0)

    def save(force: bool) -> None:
        step = int(jax.device_get(state.step))
        if force or ckpt.should_save(step):
            extra = {
                "window": window.state_dict(),
                "stream": stream.state_dict(),
                "games_read": np.asarray(games_read),
                "pending": np.asarray(pending),
            }
            ckpt.save(step, state, extra=extra, config=config_json, force=force)

    def run_holdout(step: int) -> dict[str, float] | None:
        if held is None:
            return None
        variables = {"params": state.params, "batch_stats": state.batch_stats}
        result = evaluate_holdout(spec, module, jax.device_get(variables), held)
        write_atomic(workdir / "holdout.json", json.dumps({"step": step, **result}, indent=2))
        return result

    guard = install_signal_handlers(lambda signum: (save(True), ckpt.close()), defer=True)
    metrics_out = _Metrics(workdir, enabled=True, panels=SL_PANELS)
    start = time.perf_counter()
    deadline = start + 60.0 * t.max_minutes if t.max_minutes else math.inf
    step = int(jax.device_get(state.step))
    holdout = None
    bar = None
    if t.progress:
        from tqdm import tqdm

        bar = tqdm(total=t.total_steps, initial=step, unit="step", dynamic_ncols=True)
    try:
        while step < t.total_steps and time.perf_counter() < deadline:
            record: dict[str, Any] = {}
            if pending == 0:
                read_start, added = time.perf_counter(), 0
                for _ in range(d.games_per_chunk):
                    game = stream.next_game()
                    added += window.add(_as_trajectories(game, config.board.size))
                    games_read += 1
                record["data.positions_per_second"] = added / (time.perf_counter() - read_start)
                if len(window) >= d.min_size:
                    pending = max(1, round(added * d.samples_per_position / lconfig.batch_size))
            step_metrics, learn_start = [], time.perf_counter()
            while pending > 0 and step < t.total_steps:
                sample = window.sample(
                    jax.random.fold_in(key_sample, step), lconfig.batch_size, augment=d.augment
                )
                state, metrics = step_fn(state, shard_batch(_to_learner_batch(sample, spec), mesh))
                step, pending = step + 1, pending - 1
                step_metrics.append(metrics)
                if bar is not None:
                    bar.update(1)
                save(False)
                guard.check()
                if t.eval_every and step % t.eval_every == 0:
                    holdout = run_holdout(step)
                    record.update({f"holdout.{k}": v for k, v in (holdout or {}).items()})
                if time.perf_counter() > deadline:
                    break
            if step_metrics:
                host = jax.device_get(step_metrics)
                check_finite({k: np.stack([m[k] for m in host]) for k in host[0]}, step=step)
                for k in host[0]:
                    record[f"learner.{k}"] = float(np.mean([m[k] for m in host]))
                seconds = time.perf_counter() - learn_start
                record["learner.samples_per_second"] = len(host) * lconfig.batch_size / seconds
                if bar is not None:
                    bar.set_postfix(loss=f"{record['learner.total_loss']:.3f}", refresh=False)
            record.update(
                step=step,
                games=games_read,
                epoch=stream.epoch,
                replay_size=len(window),
                wall_seconds=time.perf_counter() - start,
            )
            metrics_out.write(record)
            if t.plot_every and step % t.plot_every < max(1, len(step_metrics)):
                metrics_out.plot()
            guard.check()
        stopped = "total_steps" if step >= t.total_steps else "max_minutes"
        save(True)
        ckpt.wait()
    finally:
        guard.uninstall()
        if bar is not None:
            bar.close()
    holdout = run_holdout(step)
    if holdout is not None:
        metrics_out.write({"step": step, **{f"holdout.{k}": v for k, v in holdout.items()}})
        print(
            f"held-out {int(holdout['positions'])} positions: move accuracy "
            f"{holdout['accuracy']:.3f}, policy loss {holdout['policy_loss']:.3f}, "
            f"value MSE {holdout['value_mse']:.3f}"
        )
    metrics_out.plot()
    metrics_out.close()
    ckpt.close()
    return {
        "step": step,
        "stopped": stopped,
        "games_read": games_read,
        "skipped": len(stream.skipped),
        "resumed_from": resumed_from,
        "holdout": holdout,
    }
