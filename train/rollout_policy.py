"""``gojax train-rollout``: fit AlphaGo's fast rollout policy to a folder of game records.

The policy (``gojax.rollout_policy``) is a linear softmax over local pattern
features; fitting it is multinomial logistic regression on the moves played:
minimise ``-log pi(a | s)`` over the record moves ``a`` that the rollout
move set allows (legal, not filling the mover's own eye, pass only when
nothing else is left), with an L2 penalty, by Adam on uniformly sampled
mini-batches.

* Games are read and replayed as ``gojax train-sl`` reads them (the same
  skipping of unusable files, with a warning); the first
  ``data.holdout_games`` usable files in sorted order are held out. Every
  position's features are computed once and kept in memory (a few bytes per
  point: 300 9x9 games are ~15 MB).
* Evaluation (every ``train.eval_every`` steps and at the end): on the
  held-out moves and on as many training moves, the policy's top-1 accuracy,
  its log-loss, and those of the uniform policy over the same moves (the
  rollouts the policy replaces); ``coverage`` is the share of record moves
  the rollout move set contains (the rest -- mostly passes while points are
  left -- are neither trained on nor counted).
* Outputs: ``rollout_policy.npz`` (``gojax.rollout_policy.save``; read by
  ``gojax value-mse --rollout-policy``, ``gojax sweep``'s
  ``search.rollout_policy`` and the arena's ``uct`` agents), ``eval.json``,
  ``metrics.jsonl`` and ``learning_curve.png``. ``checkpoint.npz`` (weights,
  optimiser state, step, config; written atomically every
  ``train.checkpoint_every`` steps and at the end) lets a stopped run resume.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from gojax import rollout_policy
from gojax.atomic import write_atomic
from gojax.rollout_policy import RolloutWeights, logits_from_features
from gojax.uct import rollout_moves
from train.config_checks import KeyRanges, check_board, check_keys, check_ranges
from train.loop import _check_resumable, _Metrics, config_to_json
from train.provenance import record_start
from train.steps import run_steps
from train.supervised import SGFStream, sgf_files

__all__ = [
    "ROLLOUT_RANGES",
    "check_config",
    "default_rollout_config",
    "encode",
    "evaluate_policy",
    "train_rollout",
]

PANELS = (
    ("held-out accuracy", ("holdout.accuracy", "holdout.uniform_accuracy", "train.accuracy")),
    ("held-out log-loss", ("holdout.nll", "holdout.uniform_nll", "train.nll")),
    ("training loss", ("loss",)),
    ("weights", ("weight_norm",)),
)


def default_rollout_config() -> ml_collections.ConfigDict:
    """Every key a rollout-policy config has; ``configs/rollout_*.py`` start from this.

    Groups: ``board`` (the games' size; rules and komi for files that do not
    say), ``data`` (the SGF folder, the hold-out), ``train`` (optimiser,
    length, saving, logging).
    """
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.board = ml_collections.ConfigDict(dict(size=19, komi=7.5, rules="chinese"))
    c.data = ml_collections.ConfigDict(
        dict(
            sgf_dir="",  # required: a folder searched recursively for *.sgf
            holdout_games=16,  # usable files kept out of training for evaluation
        )
    )
    c.train = ml_collections.ConfigDict(
        dict(
            total_steps=2_000,
            batch_size=512,  # positions a step
            learning_rate=0.05,  # Adam
            l2=1e-6,  # penalty on the squared weights (summed)
            max_minutes=0.0,  # 0: no time limit
            checkpoint_every=500,
            eval_every=250,  # steps between evaluations (0: only at the end)
            plot_every=250,
            progress=True,
        )
    )
    return c


# The numeric keys of a rollout-policy config. The held-out games judge the run: at least 1.
ROLLOUT_RANGES = KeyRanges(
    at_least_one=(
        "data.holdout_games",
        "train.total_steps",
        "train.batch_size",
        "train.checkpoint_every",
    ),
    at_least_zero=(
        "seed",
        "train.l2",
        "train.max_minutes",
        "train.eval_every",
        "train.plot_every",
    ),
    positive=("train.learning_rate",),
)


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` naming the first unknown key or bad value of a ``gojax
    train-rollout`` config (before anything is read or written)."""
    check_keys(config, default_rollout_config())
    check_board(config)
    check_ranges(config, ROLLOUT_RANGES)


# ----------------------------------------------------------------------------
# Examples.


def encode(states) -> dict[str, jax.Array]:
    """``[T]`` states → the policy's features and the rollout move set of each position.

    Keys: ``pattern``, ``last``, ``own_last`` (``[T, P]``, see
    ``gojax.rollout_policy.features``) and ``allowed [T, P + 1]`` bool.
    """
    feats = jax.vmap(rollout_policy.features)(states)
    feats["allowed"] = jax.vmap(rollout_moves)(states)
    return feats


def _examples(games: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The games' positions whose record move the rollout move set allows, stacked.

    Adds ``moves``: how many record moves there were (kept or not).
    """
    inputs = {k: np.concatenate([g["inputs"][k] for g in games]) for k in games[0]["inputs"]}
    action = np.concatenate([g["action"] for g in games]).astype(np.int32)
    keep = inputs["allowed"][np.arange(action.size), action]
    out = {k: v[keep] for k, v in inputs.items()}
    out["action"] = action[keep]
    out["moves"] = np.asarray(action.size)
    return out


def _load_games(config, stream: SGFStream) -> tuple[list[dict], list[dict]]:
    """(held-out games, training games): every usable file, read once."""
    held, training = [], []
    for path in sgf_files(config.data.sgf_dir):
        game = stream.load(path)
        if game is None:
            continue
        (held if len(held) < config.data.holdout_games else training).append(game)
    if not training:
        raise ValueError(
            f"{config.data.sgf_dir}: no usable training games (need more than "
            f"data.holdout_games={config.data.holdout_games} usable files; see the warnings)"
        )
    return held, training


# ----------------------------------------------------------------------------
# Loss, step and evaluation.


def _masked_logits(weights: RolloutWeights, batch: dict[str, jax.Array]) -> jax.Array:
    """``[B, P + 1]``: the policy's logits, -inf outside the rollout move set."""
    points = logits_from_features(weights, batch)
    full = jnp.pad(points, ((0, 0), (0, 1)))  # pass: allowed only when no point is
    return jnp.where(batch["allowed"], full, -jnp.inf)


def _nll(logits: jax.Array, action: jax.Array) -> jax.Array:
    """``[B]``: ``-log softmax(logits)[action]`` of each row."""
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, action[:, None], axis=1)[:, 0]


def _squared_norm(weights: RolloutWeights) -> jax.Array:
    return sum(jnp.sum(jnp.square(w)) for w in weights)


def _optimizer(train) -> optax.GradientTransformation:
    return optax.adam(train.learning_rate)


def _make_step(train):
    optimizer = _optimizer(train)

    @jax.jit
    def step(weights, opt_state, batch):
        def loss_fn(w):
            nll = _nll(_masked_logits(w, batch), batch["action"])
            return jnp.mean(nll) + train.l2 * _squared_norm(w)

        loss, grads = jax.value_and_grad(loss_fn)(weights)
        updates, opt_state = optimizer.update(grads, opt_state, weights)
        return optax.apply_updates(weights, updates), opt_state, loss

    return step


@jax.jit
def _chunk_metrics(weights, batch, valid):
    """Sums over one chunk: policy and uniform log-loss and accuracy (``valid`` rows)."""
    logits = _masked_logits(weights, batch)
    count = jnp.sum(batch["allowed"], axis=1).astype(jnp.float32)
    hit = jnp.argmax(logits, axis=1) == batch["action"]
    sums = {
        "nll": _nll(logits, batch["action"]),
        "accuracy": hit.astype(jnp.float32),
        "uniform_nll": jnp.log(count),
        "uniform_accuracy": 1.0 / count,  # the chance a uniform draw is the move
    }
    return {k: jnp.sum(jnp.where(valid, v, 0.0)) for k, v in sums.items()}


def evaluate_policy(
    weights: RolloutWeights, examples: dict[str, np.ndarray], chunk: int = 1024
) -> dict[str, float]:
    """Mean ``nll``, ``accuracy``, ``uniform_nll``, ``uniform_accuracy`` over ``examples``,
    and ``coverage`` (kept moves / record moves) and ``positions``."""
    n = examples["action"].shape[0]
    totals: dict[str, float] = {}
    for start in range(0, n, chunk):
        index = np.arange(start, start + chunk)
        valid = index < n
        index = np.minimum(index, n - 1)  # a padded last chunk: one compiled shape
        batch = {k: jnp.asarray(examples[k][index]) for k in _BATCH_KEYS}
        for k, v in _chunk_metrics(weights, batch, jnp.asarray(valid)).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    out = {k: v / n for k, v in totals.items()}
    out["coverage"] = n / int(examples["moves"])
    out["positions"] = n
    return out


_BATCH_KEYS = ("pattern", "last", "own_last", "allowed", "action")


# ----------------------------------------------------------------------------
# The checkpoint: one .npz, written atomically.


def _save_checkpoint(path: Path, step: int, weights, opt_state, config_json) -> None:
    leaves = jax.tree.leaves((weights, opt_state))
    buffer = io.BytesIO()
    arrays = {f"leaf_{i:03d}": np.asarray(x) for i, x in enumerate(leaves)}
    config = np.asarray(json.dumps(config_json))
    # Compressed: the tables are mostly zeros (patterns never seen keep their initial 0).
    np.savez_compressed(buffer, step=np.asarray(step), config=config, **arrays)
    write_atomic(path, buffer.getvalue())


def _restore_checkpoint(path: Path, template) -> tuple[int, Any, dict[str, Any]]:
    """``(step, (weights, opt_state), config)``; ValueError naming the file if unreadable."""
    structure = jax.tree.structure(template)
    shapes = [(np.shape(x), np.asarray(x).dtype) for x in jax.tree.leaves(template)]
    try:
        with np.load(path, allow_pickle=False) as data:
            step = int(data["step"])
            config = json.loads(str(data["config"]))
            leaves = [data[f"leaf_{i:03d}"] for i in range(len(shapes))]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: unreadable checkpoint ({error}); use a new workdir") from None
    for leaf, (shape, dtype) in zip(leaves, shapes, strict=True):
        if leaf.shape != shape or leaf.dtype != dtype:
            raise ValueError(f"{path}: checkpoint does not match this policy; use a new workdir")
    return step, jax.tree.unflatten(structure, [jnp.asarray(x) for x in leaves]), config


def checkpoint_saver(path: Path, config_json, state: dict[str, Any], every: int):
    """``run_steps``'s ``save(final)``: ``state``'s ``weights`` and ``opt_state`` at its
    ``step`` to ``path`` once ``every`` steps (0: never) have passed since ``state["saved"]``,
    and at the end."""

    def save(final: bool) -> None:
        current = state["step"]
        due = every and current - state["saved"] >= every
        if (final or due) and current != state["saved"]:
            _save_checkpoint(path, current, state["weights"], state["opt_state"], config_json)
            state["saved"] = current

    return save


class _NoAsyncSaves:
    """What ``run_steps`` calls on a checkpointer: saves here are synchronous."""

    def wait(self) -> None:
        pass

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------
# The run.


def train_rollout(config: ml_collections.ConfigDict, workdir: str | os.PathLike) -> dict[str, Any]:
    """Fit the rollout policy; returns ``{"step", "stopped", "eval", "positions", "holdout"}``."""
    workdir = Path(workdir)
    check_config(config)
    if not config.data.sgf_dir:
        raise ValueError("data.sgf_dir is required: a folder of SGF game records")
    config_json = config_to_json(config)
    train = config.train
    weights = rollout_policy.zero_weights()
    opt_state = _optimizer(train).init(weights)
    checkpoint = workdir / "checkpoint.npz"
    step = 0
    if checkpoint.exists():  # before reading the games: a bad resume fails fast
        step, (weights, opt_state), saved = _restore_checkpoint(checkpoint, (weights, opt_state))
        # Only train.* may change on resume.
        _check_resumable(saved, config_json, workdir, step, where=checkpoint)
    stream = SGFStream(
        [],
        encode,
        size=config.board.size,
        default_rules=config.board.rules,
        seed=config.seed,
    )
    held_games, train_games = _load_games(config, stream)
    holdout, training = _examples(held_games), _examples(train_games)
    n_train = training["action"].shape[0]
    # As many training positions as held-out ones, fixed: the over-fitting check.
    probe_rng = np.random.default_rng([config.seed, 1])
    probe_index = probe_rng.choice(n_train, min(n_train, holdout["action"].shape[0]), False)
    probe = {k: training[k][probe_index] for k in _BATCH_KEYS}
    probe["moves"] = np.asarray(probe_index.size)  # coverage is not meaningful here

    workdir.mkdir(parents=True, exist_ok=True)
    record_start(workdir, config_json, step)
    metrics = _Metrics(workdir, True, panels=PANELS)
    update = _make_step(train)
    # "held", "seen": the last evaluation's numbers (run_steps always evaluates the last step).
    state = {"weights": weights, "opt_state": opt_state, "step": step, "saved": step}

    def advance(current: int) -> dict[str, Any]:
        rng = np.random.default_rng([config.seed, current])
        index = rng.integers(0, n_train, train.batch_size)
        batch = {k: jnp.asarray(training[k][index]) for k in _BATCH_KEYS}
        state["weights"], state["opt_state"], loss = update(
            state["weights"], state["opt_state"], batch
        )
        state["step"] = current + 1
        return {"loss": float(loss)}

    def evaluate(current: int) -> dict[str, Any]:
        del current
        held = state["held"] = evaluate_policy(state["weights"], holdout)
        seen = state["seen"] = evaluate_policy(state["weights"], probe)
        norm = math.sqrt(float(_squared_norm(state["weights"])))
        return (
            {f"holdout.{k}": v for k, v in held.items()}
            | {f"train.{k}": seen[k] for k in ("nll", "accuracy")}
            | {"weight_norm": norm}
        )

    step, stopped = run_steps(
        train,
        step,
        advance,
        evaluate=evaluate,
        save=checkpoint_saver(checkpoint, config_json, state, train.checkpoint_every),
        ckpt=_NoAsyncSaves(),
        metrics=metrics,
        unit="step",
        postfix=lambda r: {"loss": f"{r['loss']:.3f}"} if "loss" in r else {},
    )
    final, seen = state["held"], state["seen"]
    sources = f"{len(train_games)} games from {config.data.sgf_dir}"
    rollout_policy.save(
        workdir / "rollout_policy.npz",
        state["weights"],
        trained_on=sources,
        step=str(step),
        holdout_accuracy=f"{final['accuracy']:.4f}",
    )
    summary = {
        "step": step,
        "stopped": stopped,
        "positions": n_train,
        "holdout": final["positions"],
        "skipped_files": len(stream.skipped),
        "eval": {"holdout": final, "train": {k: seen[k] for k in ("nll", "accuracy")}},
    }
    write_atomic(workdir / "eval.json", json.dumps(summary, indent=2))
    return summary
