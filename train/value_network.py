"""AlphaGo's value network: regression on one position from each of many self-play games.

Silver et al. 2016 (Methods, "Reinforcement learning of value networks"):
training a value net on every position of whole games over-fits, because
successive positions are strongly correlated and share one outcome (their
net memorised the games: 0.19 MSE on the training set, 0.37 on a test set).
So every position of their data set came from a game of its own:

1. a random ``U`` in ``1..450``;
2. moves ``1 .. U - 1`` sampled from the SL policy network;
3. move ``U`` uniformly at random among the legal moves;
4. the rest of the game sampled from the RL policy network, to the end;

and the pair ``(s_{U+1}, z_{U+1})`` -- the position after the random move
and the game's result for the player to move in it -- went into the data
set (30 million of them). The value net was then fitted by SGD on the mean
squared error ``(v(s) - z)^2``: 0.226 on the training set, 0.234 on the test
set, and at every stage of the game more accurate than Monte-Carlo rollouts
with the fast rollout policy (Fig. 2b).

``gojax train-value`` does this for ``AlphaGoNet`` presets, whose value
network shares nothing with the policy network: the run starts from the
``init`` run's net (typically the SL run: AlphaGo's search took its prior
from the SL policy) and trains only the value network's parameters, so the
result is one checkpoint holding the SL policy and the new value net, which
``gojax gtp --checkpoint``, the arena and sweeps play as any run's. The
games are played by the SL run (``players.sl_workdir``) and the RL run
(``players.rl_workdir``, e.g. a ``gojax train-pg`` run); empty names stand
for the ``init`` run.

Data: ``data.positions`` training positions and ``data.holdout`` held-out
ones, generated in batches of ``data.games`` games (one jitted program per
batch: a ``lax.scan`` over moves; a game that ends before move ``U`` gives
no position) and written as numbered ``.npz`` parts under
``workdir/data/`` (atomically, so an interrupted run keeps its finished
parts and regenerates only the rest). Each held-out position also gets
``data.rollouts`` random rollouts (``gojax.uct.random_rollout``), the
baseline the value net is compared with.

Evaluation (``eval.json`` and the metrics): MSE on the held-out positions of
the net being trained, of the starting net's value, of predicting 0 (exactly
1 when no game is drawn), of the rollouts' mean and of AlphaGo's mix
``(1 - lam) v + lam r``; the same MSE on as many training positions (the
gap is the over-fitting); all of them also by move number ``U``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

import gojax
from gojax.atomic import atomic_file, write_atomic
from train import model as model_lib
from train.checkpoint import restore_matching_network
from train.config_checks import (
    KeyRanges,
    bad_value,
    check_board,
    check_keys,
    check_learner,
    check_ranges,
)
from train.learner import (
    LearnerConfig,
    TrainState,
    check_finite,
    learning_rate_schedule,
    make_optimizer,
)
from train.loop import (
    _Metrics,
    config_to_json,
    learner_config,
    learner_group,
)
from train.policy_gradient import allowed_moves
from train.positions import mse_by_bucket, rollout_outcomes
from train.provenance import record_start
from train.steps import fresh_state, open_checkpoints, run_steps

__all__ = [
    "VALUE_RANGES",
    "Sampling",
    "check_config",
    "default_value_config",
    "make_generate",
    "make_value_update",
    "train_value",
]

VALUE_PANELS = (
    ("value MSE (training batches)", ("value.mse",)),
    ("held-out MSE against the outcome", ("eval.heldout.*",)),
    ("value net's MSE on training positions", ("eval.train_positions",)),
    ("gradient norm", ("learner.grad_norm",)),
)


def default_value_config() -> ml_collections.ConfigDict:
    """Every key a value-network config has; ``configs/value_*.py`` start from this.

    Groups: ``board``, ``model`` (an ``AlphaGoNet`` preset; every run read must
    have it), ``init`` (the net whose value network is trained and whose
    policy is kept), ``players`` (the SL and RL runs that play the games),
    ``data`` (how many positions and how they are drawn), ``learner``
    (``LearnerConfig``'s optimiser fields, ``l2`` and ``batch_size``; its loss
    weights are not used), ``train``.
    """
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.board = ml_collections.ConfigDict(dict(size=9, komi=7.0, rules="tromp-taylor", max_moves=0))
    c.model = ml_collections.ConfigDict(
        dict(preset="alphago_tiny", dtype="float32", opponent_policy=False)
    )
    c.init = ml_collections.ConfigDict(dict(workdir="", step=0))  # step 0: the newest
    # Empty workdirs: the init run. Steps 0: the newest.
    c.players = ml_collections.ConfigDict(dict(sl_workdir="", sl_step=0, rl_workdir="", rl_step=0))
    c.data = ml_collections.ConfigDict(
        dict(
            positions=16_384,  # training positions, one per game
            holdout=1_024,  # held-out positions, from games of their own
            games=512,  # games played at once (one jitted program)
            max_random_move=0,  # U is uniform in 1..max_random_move (0: size * size)
            temperature=1.0,  # the policies' moves sampled from softmax(logits / temperature)
            rollouts=16,  # random rollouts per held-out position (the baseline)
            lam=0.5,  # the mix's weight on the rollouts (AlphaGo's lambda)
            bucket_width=10,  # moves per bucket of the evaluation by move number
        )
    )
    c.learner = learner_group(
        LearnerConfig(
            optimizer="sgd",
            lr_boundaries=(),
            lr_values=(3e-3,),
            momentum=0.9,
            l2=1e-4,
            batch_size=64,
        )
    )
    c.train = ml_collections.ConfigDict(
        dict(
            total_steps=2_000,
            max_minutes=0.0,  # 0: no time limit
            augment=True,  # each sample in a random one of the 8 symmetries
            checkpoint_every=500,
            keep_checkpoints=3,
            eval_every=250,  # steps between held-out evaluations (0: only at the end)
            plot_every=50,
            progress=True,
        )
    )
    return c


# ----------------------------------------------------------------------------
# Generating positions.


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Hashable description of a batch of data games (a static argument)."""

    size: int
    komi: float
    rules: str
    max_moves: int
    games: int
    max_random_move: int
    temperature: float


def _uniform_points(allowed: jax.Array) -> jax.Array:
    """``[B, A]`` logits of the random move: uniform over allowed points, pass only if none."""
    points = allowed[:, :-1]
    moves = jnp.concatenate([points, ~jnp.any(points, -1, keepdims=True)], axis=-1)
    return jnp.where(moves & allowed, 0.0, -jnp.inf)


@functools.cache
def make_generate(spec: model_lib.ModelSpec, sampling: Sampling):
    """A jitted ``generate(sl_vars, rl_vars, key) -> positions`` for one batch of games.

    Game ``i`` draws ``U_i`` uniformly from ``1..max_random_move``, samples
    moves ``1 .. U_i - 1`` from the SL net, plays move ``U_i`` uniformly at
    random (pass only when no point is allowed) and the rest from the RL net;
    a policy's moves exclude the mover's own eyes. ``positions``:
    ``planes [B, N, N, C]`` uint8 (the net's input in the position after
    move ``U``), ``z [B]`` float32 (the game's result for the player to move
    there: +1, -1 or 0), ``u [B]`` int32, ``valid [B]`` (False: the game
    ended before move ``U``), ``states`` (the positions, a ``[B]``
    ``GoState``) and ``length [B]`` (moves in the game).
    """
    module = model_lib.build(spec)
    template = gojax.new_game(
        sampling.size, komi=sampling.komi, rules=sampling.rules, max_moves=sampling.max_moves
    )
    b = sampling.games

    def step(carry, key):
        states, u, recorded, sl_vars, rl_vars = carry
        (inputs,) = model_lib.encode(spec, states)
        sl = model_lib.forward(spec, module, sl_vars, (inputs,), train=False)["policy_logits"]
        rl = model_lib.forward(spec, module, rl_vars, (inputs,), train=False)["policy_logits"]
        t = states.move_number
        allowed = jax.vmap(allowed_moves)(states)
        logits = jnp.where((t < u - 1)[:, None], sl, rl) / sampling.temperature
        logits = jnp.where(allowed, logits, -jnp.inf)
        logits = jnp.where((t == u - 1)[:, None], _uniform_points(allowed), logits)
        # A finished game has nothing allowed; it draws pass, which play() ignores.
        logits = jnp.where(jnp.any(allowed, -1, keepdims=True), logits, 0.0)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        # The position after move U is the one seen when U moves have been played.
        reached = (t == u) & ~states.terminated
        planes, kept_states, valid = recorded

        def keep(new, old):
            return jnp.where(reached.reshape((b,) + (1,) * (new.ndim - 1)), new, old)

        recorded = (
            keep(inputs.astype(jnp.uint8), planes),
            jax.tree.map(keep, states, kept_states),
            valid | reached,
        )
        states = jax.vmap(gojax.play)(states, action)
        return (states, u, recorded, sl_vars, rl_vars), None

    @jax.jit
    def generate(sl_vars, rl_vars, key):
        start = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), template)
        key_u, key_moves = jax.random.split(key)
        u = jax.random.randint(key_u, (b,), 1, sampling.max_random_move + 1)
        (inputs,) = model_lib.encode(spec, start)
        recorded = (inputs.astype(jnp.uint8), start, jnp.zeros(b, bool))
        keys = jax.random.split(key_moves, sampling.max_moves)
        carry = (start, u, recorded, sl_vars, rl_vars)
        (final, _, recorded, _, _), _ = jax.lax.scan(step, carry, keys)
        planes, states, valid = recorded
        z = jax.vmap(gojax.winner)(final) * states.to_play
        return {
            "planes": planes,
            "z": z.astype(jnp.float32),
            "u": u.astype(jnp.int32),
            "valid": valid,
            "states": states,
            "length": final.move_number,
        }

    return generate


def _part_path(directory: Path, split: str, index: int) -> Path:
    return directory / f"{split}-{index:05d}.npz"


def _read_part(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError) as err:
        raise ValueError(
            f"{path}: not a readable data part ({err}); delete it to regenerate"
        ) from None


def generate_split(
    directory: Path,
    split: str,
    count: int,
    make_batch: Callable[[int], dict[str, np.ndarray]],
    *,
    progress: bool,
) -> dict[str, np.ndarray]:
    """``count`` positions of ``split``: the parts already on disk, then new batches.

    ``make_batch(index)`` returns the valid positions of batch ``index``
    (deterministic in the index) as host arrays; each is written as part
    ``index`` before the next is played. Returns the first ``count``
    positions of the parts, in order. A batch without a single position
    raises ``ValueError`` (its games all end before their random move: more
    batches would not end either).
    """
    directory.mkdir(parents=True, exist_ok=True)
    parts: list[dict[str, np.ndarray]] = []
    have = index = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=count, desc=f"{split} positions", unit="pos", dynamic_ncols=True)
    try:
        while have < count:
            path = _part_path(directory, split, index)
            if path.exists():
                part = _read_part(path)
            else:
                part = make_batch(index)
                if not len(part["z"]):
                    raise ValueError(
                        f"{split} batch {index}: no game lasted beyond its random move; "
                        "lower data.max_random_move, or check the players' runs"
                    )
                with atomic_file(path, "wb") as handle:
                    np.savez(handle, **part)
            parts.append(part)
            have += len(part["z"])
            index += 1
            if bar is not None:
                bar.update(min(have, count) - bar.n)
    finally:
        if bar is not None:
            bar.close()
    return {k: np.concatenate([p[k] for p in parts])[:count] for k in parts[0]}


def _rollout_means(states: gojax.GoState, key: jax.Array, rollouts: int) -> np.ndarray:
    """``[M]`` float32 mean result of ``rollouts`` random games from each position."""
    return rollout_outcomes(states, key, rollouts).astype(np.float32).mean(axis=1)


# ----------------------------------------------------------------------------
# Training.


def _is_value_network(path: tuple[Any, ...]) -> bool:
    """Whether a parameter belongs to ``AlphaGoNet``'s value network (modules ``value*``)."""
    return str(getattr(path[0], "key", path[0])).startswith("value")


def _value_kernels_l2(params: Any) -> jax.Array:
    leaves = jax.tree_util.tree_leaves_with_path(params)
    return sum(
        jnp.sum(jnp.square(p)) for path, p in leaves if _is_value_network(path) and p.ndim >= 2
    )


@functools.cache
def make_value_update(spec: model_lib.ModelSpec, config: LearnerConfig):
    """A jitted ``update(state, planes, z, symmetries) -> (state, metrics)``: one SGD step.

    ``planes [B, N, N, C]`` uint8, ``z [B]``, ``symmetries [B]`` int32 (0 is
    the identity). The loss is ``mean((v - z)^2) + l2 * sum(w^2)`` over the
    value network's kernels; the update is applied to the value network only
    (every other parameter keeps its value exactly, weight decay included).
    ``state`` is donated.
    """
    module = model_lib.build(spec)
    tx = make_optimizer(config)
    schedule = learning_rate_schedule(config)

    def loss_fn(params, batch_stats, planes, z):
        variables = {"params": params, "batch_stats": batch_stats}
        out = model_lib.forward(spec, module, variables, (planes,), train=False)
        mse = jnp.mean(jnp.square(out["value"] - z))
        l2 = _value_kernels_l2(params)
        return mse + config.l2 * l2, {"mse": mse, "l2_loss": l2}

    @functools.partial(jax.jit, donate_argnums=0)
    def update(state: TrainState, planes: jax.Array, z: jax.Array, symmetries: jax.Array):
        planes = jax.vmap(gojax.transform_planes)(planes.astype(jnp.float32), symmetries)
        grads, metrics = jax.grad(loss_fn, has_aux=True)(state.params, state.batch_stats, planes, z)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        updates = jax.tree_util.tree_map_with_path(
            lambda path, u: u if _is_value_network(path) else jnp.zeros_like(u), updates
        )
        metrics["grad_norm"] = optax.tree.norm(grads)
        metrics["learning_rate"] = jnp.asarray(schedule(state.step), jnp.float32)
        state = state.replace(
            step=state.step + 1,
            params=optax.apply_updates(state.params, updates),
            opt_state=opt_state,
        )
        return state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    return update


@functools.cache
def _make_predict(spec: model_lib.ModelSpec):
    module = model_lib.build(spec)

    @jax.jit
    def predict(variables, planes):
        inputs = (planes.astype(jnp.float32),)
        return model_lib.forward(spec, module, variables, inputs, train=False)["value"]

    return predict


def predict_values(
    spec: model_lib.ModelSpec, variables: Any, planes: np.ndarray, batch: int = 1024
) -> np.ndarray:
    """``[M]`` float32 value-net outputs for ``[M, N, N, C]`` planes, ``batch`` at a time."""
    predict = _make_predict(spec)
    out = np.zeros(len(planes), np.float32)
    for start in range(0, len(planes), batch):
        part = planes[start : start + batch]
        padded = np.zeros((batch,) + part.shape[1:], part.dtype)  # one compiled shape
        padded[: len(part)] = part
        out[start : start + len(part)] = np.asarray(predict(variables, padded))[: len(part)]
    return out


# ----------------------------------------------------------------------------
# The run.


# The numeric keys of a value-network config (the learner's: ``check_learner``).
VALUE_RANGES = KeyRanges(
    at_least_one=(
        "data.positions",
        "data.holdout",
        "data.games",
        "data.rollouts",
        "data.bucket_width",
        "train.total_steps",
        "train.checkpoint_every",
        "train.keep_checkpoints",
    ),
    at_least_zero=(
        "seed",
        "board.max_moves",
        "init.step",
        "players.sl_step",
        "players.rl_step",
        "data.max_random_move",
        "train.max_minutes",
        "train.eval_every",
        "train.plot_every",
    ),
    fractions=("data.lam",),
    positive=("data.temperature",),
)


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` naming the first unknown key or bad value of a ``gojax
    train-value`` config (before anything is read or written)."""
    check_keys(config, default_value_config())
    check_board(config)
    check_ranges(config, VALUE_RANGES)
    check_learner(config)
    learner_config(config)
    spec = model_lib.spec_from_config(config.model)
    if spec.encoder != "alphago":
        raise ValueError(
            f"model.preset {spec.preset!r} is not an AlphaGoNet preset: train-value trains "
            "AlphaGo's separate value network (alphago, alphago_tiny, alphago_tiny_raw)"
        )
    batch, positions = config.learner.batch_size, config.data.positions
    if batch > positions:
        raise bad_value("learner.batch_size", batch, f"at most data.positions ({positions})")


def _sampling(config: ml_collections.ConfigDict) -> Sampling:
    b, d = config.board, config.data
    max_moves = b.max_moves or 2 * b.size * b.size
    return Sampling(
        size=b.size,
        komi=float(b.komi),
        rules=b.rules,
        max_moves=max_moves,
        games=d.games,
        max_random_move=min(d.max_random_move or b.size * b.size, max_moves),
        temperature=float(d.temperature),
    )


def _players(config, spec: model_lib.ModelSpec) -> tuple[dict, dict, dict]:
    """The init, SL and RL runs' variables (an empty player workdir: the init run)."""
    if not config.init.workdir:
        raise ValueError("init.workdir is required: the run whose value network is trained")
    size = config.board.size

    def read(workdir: str, step: int, role: str) -> dict:
        return restore_matching_network(workdir, step or None, spec, size, role=role).variables

    init = read(config.init.workdir, config.init.step, "init run")
    p = config.players
    sl = read(p.sl_workdir, p.sl_step, "SL policy run") if p.sl_workdir else init
    rl = read(p.rl_workdir, p.rl_step, "RL policy run") if p.rl_workdir else init
    return init, sl, rl


_DATA_KEYS = ("seed", "board", "model", "init", "players", "data")


def _check_data_config(directory: Path, config_json: dict[str, Any]) -> None:
    """Refuse data parts written under other data settings; record the settings otherwise."""
    settings = {k: config_json[k] for k in _DATA_KEYS}
    path = directory / "settings.json"
    if path.exists():
        saved = json.loads(path.read_text())
        differ = sorted(k for k in _DATA_KEYS if saved.get(k) != settings[k])
        if differ:
            raise ValueError(
                f"{directory}: its positions were generated with other {', '.join(differ)} "
                "settings; use a new workdir (or delete the data folder to regenerate)"
            )
        return
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(settings, indent=2) + "\n")


def _generate_data(config, spec, sl, rl, workdir: Path, progress: bool):
    """The training and held-out positions (generated, or read from ``workdir/data``)."""
    sampling = _sampling(config)
    generate = make_generate(spec, sampling)
    key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 1)
    key_train, key_holdout, key_rollouts = jax.random.split(key, 3)
    sl, rl = jax.device_put(sl), jax.device_put(rl)

    def batch_of(split_key, with_rollouts: bool):
        def make_batch(index: int) -> dict[str, np.ndarray]:
            out = generate(sl, rl, jax.random.fold_in(split_key, index))
            (keep,) = np.nonzero(np.asarray(out["valid"]))
            part = {k: np.asarray(out[k])[keep] for k in ("planes", "z", "u", "length")}
            if with_rollouts:
                states = jax.tree.map(lambda x: x[keep], out["states"])
                part["rollouts"] = _rollout_means(
                    states, jax.random.fold_in(key_rollouts, index), config.data.rollouts
                )
            return part

        return make_batch

    directory = workdir / "data"
    _check_data_config(directory, config_to_json(config))
    holdout = generate_split(
        directory, "holdout", config.data.holdout, batch_of(key_holdout, True), progress=progress
    )
    train = generate_split(
        directory, "train", config.data.positions, batch_of(key_train, False), progress=progress
    )
    return train, holdout


def _mse(prediction: np.ndarray, z: np.ndarray) -> float:
    return float(np.mean(np.square(prediction.astype(np.float64) - z)))


def evaluate_heldout(
    predict: Callable[[np.ndarray], np.ndarray],
    start_values: np.ndarray,
    train: dict[str, np.ndarray],
    holdout: dict[str, np.ndarray],
    lam: float,
    bucket_width: int,
) -> dict[str, Any]:
    """MSE of every evaluator on the held-out positions, and of the net on training ones.

    ``predict(planes) -> [M]`` is the net being trained; ``start_values`` the
    starting net's values on the held-out positions. Returns ``mse`` (name ->
    value over all held-out positions), ``train_mse`` (the net on the first
    ``M`` training positions) and ``by_move`` (``train.positions.mse_by_bucket``
    of the held-out evaluators, buckets of ``bucket_width`` moves of ``U``).
    """
    z = holdout["z"].astype(np.float64)
    value = predict(holdout["planes"])
    predictions = {
        "value": value,
        "start": start_values,
        "zero": np.zeros_like(value),
        "rollouts": holdout["rollouts"],
        "mix": (1.0 - lam) * value + lam * holdout["rollouts"],
    }
    seen = slice(0, len(z))
    train_mse = _mse(predict(train["planes"][seen]), train["z"][seen])
    by_move = mse_by_bucket(predictions, z, holdout["u"] // bucket_width)
    by_move["bucket_width"] = bucket_width
    return {
        "positions": int(len(z)),
        "mse": {name: _mse(p, z) for name, p in predictions.items()},
        "train_mse": train_mse,
        "by_move": by_move,
    }


def save_by_move_plot(result: dict[str, Any], path: Path, title: str) -> None:
    """Held-out MSE against the move number ``U`` (the paper's Fig. 2b), as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_move = result["by_move"]
    width = by_move["bucket_width"]
    x = [b * width + width / 2 for b in by_move["buckets"]]
    labels = {
        "value": "value net (trained)",
        "start": "value net (start)",
        "rollouts": "random rollouts",
        "mix": "mix",
    }
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label in labels.items():
        ax.plot(x, by_move["mse"][key], marker="o", label=label)
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1, label="always 0")
    ax.set_xlabel("move number U of the random move")
    ax.set_ylabel("held-out MSE against the outcome")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    with atomic_file(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)


def train_value(config: ml_collections.ConfigDict, workdir: str | os.PathLike) -> dict[str, Any]:
    """Generate the positions (or read them back) and fit the value network, in ``workdir``.

    Resumes from the newest checkpoint and from the data parts on disk.
    Returns ``step``, ``stopped`` (``"total_steps"`` or ``"max_minutes"``),
    ``resumed_from``, ``positions`` and ``holdout`` (counts) and ``eval``
    (the last :func:`evaluate_heldout`, with its ``step``).
    """
    check_config(config)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t, d = config.train, config.data
    spec = model_lib.spec_from_config(config.model)
    lconfig = learner_config(config)
    size = config.board.size
    config_json = config_to_json(config)

    ckpt, restored = open_checkpoints(workdir, t, spec, lconfig, size, config_json)
    init, sl, rl = _players(config, spec)
    train, holdout = _generate_data(config, spec, sl, rl, workdir, progress=t.progress)
    del sl, rl
    if restored is None:
        state = fresh_state(spec, lconfig, jax.random.PRNGKey(config.seed), size, init)
        resumed_from = None
    else:
        state, resumed_from = restored.state, restored.step
    record_start(workdir, config_json, resumed_from or 0)

    update = make_value_update(spec, lconfig)
    start_values = predict_values(spec, jax.device_put(init), holdout["planes"])

    def save(force: bool) -> None:
        step = int(jax.device_get(state.step))
        if force or ckpt.should_save(step):
            ckpt.save(step, state, config=config_json, force=force)

    def evaluate_network(step: int) -> dict[str, Any]:
        variables = {"params": state.params, "batch_stats": state.batch_stats}
        result = evaluate_heldout(
            lambda planes: predict_values(spec, variables, planes),
            start_values,
            train,
            holdout,
            d.lam,
            d.bucket_width,
        )
        result = {"step": step, **result}
        write_atomic(workdir / "eval.json", json.dumps(result, indent=2) + "\n")
        title = (
            f"{spec.preset} on {size}x{size}, step {step}: "
            f"{result['positions']} held-out positions, {d.rollouts} rollouts each"
        )
        save_by_move_plot(result, workdir / "value_by_move.png", title)
        return result

    def evaluate(step: int) -> dict[str, float]:
        nonlocal last_eval
        last_eval = evaluate_network(step)
        record = {f"eval.heldout.{k}": v for k, v in last_eval["mse"].items() if k != "zero"}
        record["eval.train_positions"] = last_eval["train_mse"]
        return record

    def advance(step: int) -> dict[str, Any]:
        nonlocal state
        rng = np.random.default_rng((config.seed, step))
        rows = rng.integers(len(train["z"]), size=lconfig.batch_size)
        symmetries = rng.integers(8 if t.augment else 1, size=lconfig.batch_size)
        state, metrics = update(
            state, train["planes"][rows], train["z"][rows], symmetries.astype(np.int32)
        )
        step += 1
        host = jax.device_get(metrics)
        check_finite(host, step=step)
        return {
            "value.mse": float(host["mse"]),
            "learner.grad_norm": float(host["grad_norm"]),
            "learner.learning_rate": float(host["learning_rate"]),
        }

    last_eval = None
    step, stopped = run_steps(
        t,
        int(jax.device_get(state.step)),
        advance,
        evaluate=evaluate,
        save=save,
        ckpt=ckpt,
        metrics=_Metrics(workdir, enabled=True, panels=VALUE_PANELS),
        unit="step",
        postfix=lambda record: {"mse": f"{record['value.mse']:.3f}"},
    )
    return {
        "step": step,
        "stopped": stopped,
        "resumed_from": resumed_from,
        "positions": int(len(train["z"])),
        "holdout": int(len(holdout["z"])),
        "eval": last_eval,
    }
