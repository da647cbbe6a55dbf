"""AlphaGo's RL policy network: policy-gradient play against a pool of its earlier selves.

Silver et al. 2016 (Methods, "Reinforcement learning of policy networks"): the
RL policy network starts from the SL policy network and plays mini-batches of
games against an opponent drawn at random from a pool of its own earlier
parameters; the pool starts with the SL network and the current parameters
join it every ``pool_every`` iterations (500 in the paper), which keeps the
learner from over-fitting to its latest self. Moves are sampled from the
policies, with no search. Every game is played to the end and scored, and the
learner's moves are reinforced by REINFORCE::

    delta rho  ∝  1/n  sum_i sum_t  grad log p_rho(a_t^i | s_t^i) * (z_t^i - b(s_t^i))

with ``z`` the game's result for the player who moved (+1 win, -1 loss, 0 a
draw) and the baseline ``b`` zero (the paper's first pass) or the value head
of the net being trained (``pg.baseline="value"``; the paper's second pass
used its value network). The paper: 10,000 mini-batches of 128 games; the RL
policy then won more than 80% of its games against the SL policy, each move
sampled from the networks.

``gojax train-pg`` runs this from a ``gojax train-sl`` run's checkpoint
(``init.workdir``), or from random weights. One iteration is two jitted
programs: :func:`make_play` plays the ``pg.games`` games of a mini-batch as
one ``lax.scan`` over moves (the learner has Black in half of them) and packs
the learner's moves, and :func:`make_update` takes one optimiser step on them
(the positions in chunks of ``pg.chunk``, each rematerialised in the backward
pass, so activation memory is one chunk's). Checkpoints hold the train
state and the pool, so a run resumes where it stopped; ``gojax gtp
--checkpoint``, the arena and sweeps read them as any run's.

Moves allowed in play: the legal moves minus the mover's own eyes (the
sensibleness plane of AlphaGo's features), pass always. A game ends with two
passes or at ``board.max_moves`` (``0``: ``2 * size * size``) and is scored by
the rules' area count.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

import gojax
from gojax.atomic import write_atomic
from gojax.games import true_eyes
from train import model as model_lib
from train.arena import wilson_interval
from train.checkpoint import restore_matching_network
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
from train.provenance import record_start
from train.steps import fresh_state, open_checkpoints, run_steps

__all__ = [
    "PG_RANGES",
    "check_config",
    "default_pg_config",
    "make_play",
    "make_update",
    "train_pg",
]

BASELINES = ("none", "value")

PG_PANELS = (
    ("REINFORCE loss", ("pg.loss",)),
    ("learner's win rate", ("pg.win_rate", "eval.*")),
    ("policy entropy", ("pg.entropy",)),
    ("game length (moves)", ("pg.game_length",)),
)


def default_pg_config() -> ml_collections.ConfigDict:
    """Every key a policy-gradient config has; ``configs/pg_*.py`` start from this.

    Groups: ``board``, ``model`` (must be the ``init`` run's), ``init`` (the
    starting checkpoint), ``pg`` (games, pool, baseline, sampling), ``learner``
    (``LearnerConfig``'s optimiser fields and ``l2``; its loss weights and batch
    size are not used: the loss is REINFORCE's and the batch is ``pg.games``
    games), ``train`` (length, saving, logging, evaluation against the start).
    """
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.board = ml_collections.ConfigDict(dict(size=9, komi=7.0, rules="tromp-taylor", max_moves=0))
    c.model = ml_collections.ConfigDict(
        dict(preset="alphago_tiny", dtype="float32", opponent_policy=False)
    )
    c.init = ml_collections.ConfigDict(dict(workdir="", step=0))  # step 0: the newest
    c.pg = ml_collections.ConfigDict(
        dict(
            games=128,  # games per mini-batch (the paper's n)
            pool_every=500,  # iterations between additions of the learner to the pool
            baseline="none",  # "none" or "value": the trained net's own value head
            temperature=1.0,  # moves sampled from softmax(logits / temperature)
            chunk=4096,  # positions per forward/backward chunk of the update
        )
    )
    c.learner = learner_group(
        LearnerConfig(optimizer="sgd", lr_boundaries=(), lr_values=(0.01,), momentum=0.0, l2=0.0)
    )
    c.train = ml_collections.ConfigDict(
        dict(
            total_steps=1_000,  # iterations (one mini-batch of games and one update each)
            max_minutes=0.0,  # 0: no time limit
            checkpoint_every=50,
            keep_checkpoints=3,
            eval_every=50,  # iterations between games against the starting policy (0: end)
            eval_games=128,
            plot_every=10,
            progress=True,
        )
    )
    return c


# ----------------------------------------------------------------------------
# Playing a mini-batch.


def allowed_moves(state: gojax.GoState) -> jax.Array:
    """``[P + 1]`` bool: legal moves that do not fill the mover's own eye; pass always."""
    legal = gojax.legal_moves(state)
    points = legal[:-1] & ~true_eyes(state.board, state.to_play, state.size)
    return jnp.append(points, True) & ~state.terminated


@dataclasses.dataclass(frozen=True)
class Game:
    """Hashable description of the games played (a static argument)."""

    size: int
    komi: float
    rules: str
    max_moves: int
    games: int
    temperature: float

    @property
    def learner_moves(self) -> int:
        """The most moves the learner makes in a mini-batch (packing capacity)."""
        return (self.max_moves + 1) // 2 * self.games


@functools.cache
def make_play(spec: model_lib.ModelSpec, game: Game):
    """A jitted ``play(learner_vars, opponent_vars, key) -> (moves, results)``.

    The learner has Black in the first half of the ``game.games`` games and
    White in the rest. ``moves`` packs the learner's moves, ``M =
    game.learner_moves`` of them (the rest padding, ``valid`` False):
    ``inputs`` (the net's input tuple, 0/1 planes as uint8), ``action [M]``,
    ``allowed [M, A]``, ``value [M]`` (the learner's value of the position),
    ``game [M]`` (which game), ``valid [M]``. ``results``: ``z [B]`` (the
    learner's result: +1, -1, 0), ``length [B]`` (moves played).
    """
    module = model_lib.build(spec)
    template = gojax.new_game(game.size, komi=game.komi, rules=game.rules, max_moves=game.max_moves)
    b = game.games
    colours = jnp.where(jnp.arange(b) < (b + 1) // 2, gojax.BLACK, gojax.WHITE).astype(jnp.int8)

    def store(x):  # planes are 0/1: uint8 keeps the records 4x smaller
        return x if spec.is_katago else x.astype(jnp.uint8)

    def step(carry, key):
        states, learner_vars, opponent_vars = carry
        inputs = model_lib.encode(spec, states)
        mine = model_lib.forward(spec, module, learner_vars, inputs, train=False)
        theirs = model_lib.forward(spec, module, opponent_vars, inputs, train=False)
        learner_turn = (states.to_play == colours) & ~states.terminated
        logits = jnp.where(learner_turn[:, None], mine["policy_logits"], theirs["policy_logits"])
        allowed = jax.vmap(allowed_moves)(states)
        logits = jnp.where(allowed, logits / game.temperature, -jnp.inf)
        # A finished game has nothing allowed; it draws pass, which play() ignores.
        logits = jnp.where(jnp.any(allowed, -1, keepdims=True), logits, 0.0)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        record = {
            "inputs": tuple(store(x) for x in inputs),
            "action": action,
            "allowed": allowed,
            "value": mine["value"],
            "learner": learner_turn,
        }
        states = jax.vmap(gojax.play)(states, action)
        return (states, learner_vars, opponent_vars), record

    @jax.jit
    def play(learner_vars, opponent_vars, key):
        start = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), template)
        keys = jax.random.split(key, game.max_moves)
        (final, _, _), rec = jax.lax.scan(step, (start, learner_vars, opponent_vars), keys)
        z = (jax.vmap(gojax.winner)(final) * colours).astype(jnp.float32)
        # Pack the learner's moves, time-major order, into M slots.
        (index,) = jnp.nonzero(rec["learner"].reshape(-1), size=game.learner_moves, fill_value=0)
        valid = jnp.arange(game.learner_moves) < jnp.sum(rec["learner"])
        flat = lambda x: x.reshape((-1,) + x.shape[2:])[index]
        moves = {
            "inputs": tuple(flat(x) for x in rec["inputs"]),
            "action": flat(rec["action"]),
            "allowed": flat(rec["allowed"]),
            "value": flat(rec["value"]),
            "game": index % b,
            "valid": valid,
        }
        return moves, {"z": z, "length": final.move_number}

    return play


# ----------------------------------------------------------------------------
# The update.


def _kernels_l2(params: Any) -> jax.Array:
    return sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params) if p.ndim >= 2)


@functools.cache
def make_update(spec: model_lib.ModelSpec, config: LearnerConfig, chunk: int, games: int):
    """A jitted ``update(state, moves, advantage) -> (state, metrics)``: one REINFORCE step.

    ``moves`` as :func:`make_play` packs them (the last of the chunks may be
    shorter), ``advantage [M]`` is ``z - b`` on valid moves (padding rows count
    for nothing). The loss is ``-sum(advantage * log p(action)) / games +
    l2 * sum(w^2)``, ``p`` the policy over the moves that were allowed.
    ``state`` is donated.
    """
    module = model_lib.build(spec)
    tx = make_optimizer(config)
    schedule = learning_rate_schedule(config)

    def chunk_terms(params, batch_stats, part):
        variables = {"params": params, "batch_stats": batch_stats}
        inputs = tuple(x.astype(jnp.float32) for x in part["inputs"])
        out = model_lib.forward(spec, module, variables, inputs, train=False)
        # Padding rows allow nothing: let them allow everything, so that no NaN reaches the
        # gradient (their advantage is 0); a finite floor keeps 0 * log(0) out of it too.
        allowed = part["allowed"] | ~jnp.any(part["allowed"], axis=-1, keepdims=True)
        logp = jax.nn.log_softmax(jnp.where(allowed, out["policy_logits"], -1e9))
        chosen = jnp.take_along_axis(logp, part["action"][:, None], axis=-1)[:, 0]
        entropy = -jnp.sum(jnp.where(allowed, jnp.exp(logp) * logp, 0.0), axis=-1)
        return jnp.sum(part["advantage"] * chosen), jnp.sum(jnp.where(part["valid"], entropy, 0))

    def loss_fn(params, batch_stats, moves):
        # Chunks in an unrolled loop, not lax.map: XLA's CPU convolutions inside a loop
        # body ran 100x slower (70 s against 0.7 s for 4096 positions of alphago_tiny).
        terms = jax.checkpoint(functools.partial(chunk_terms, params, batch_stats))
        weighted = entropy = 0.0
        for start in range(0, moves["valid"].shape[0], chunk):
            part_weighted, part_entropy = terms(
                jax.tree.map(lambda x, start=start: x[start : start + chunk], moves)
            )
            weighted, entropy = weighted + part_weighted, entropy + part_entropy
        reinforce = -weighted / games
        l2 = _kernels_l2(params)
        count = jnp.maximum(jnp.sum(moves["valid"]), 1)
        metrics = {"loss": reinforce, "entropy": entropy / count, "l2_loss": l2}
        return reinforce + config.l2 * l2, metrics

    @functools.partial(jax.jit, donate_argnums=0)
    def update(state: TrainState, moves: dict, advantage: jax.Array):
        moves = {**moves, "advantage": jnp.where(moves["valid"], advantage, 0.0)}
        grads, metrics = jax.grad(loss_fn, has_aux=True)(state.params, state.batch_stats, moves)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        metrics["grad_norm"] = optax.tree.norm(grads)
        metrics["learning_rate"] = jnp.asarray(schedule(state.step), jnp.float32)
        state = state.replace(
            step=state.step + 1,
            params=optax.apply_updates(state.params, updates),
            opt_state=opt_state,
        )
        return state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    return update


def advantages(moves: dict, z: jax.Array, baseline: str) -> jax.Array:
    """``[M]`` ``z`` of each move's game, minus the learner's value with ``baseline="value"``."""
    result = z[moves["game"]]
    if baseline == "value":
        result = result - moves["value"]
    return jnp.where(moves["valid"], result, 0.0)


# ----------------------------------------------------------------------------
# The run.


def _game(config: ml_collections.ConfigDict, games: int) -> Game:
    b = config.board
    return Game(
        size=b.size,
        komi=float(b.komi),
        rules=b.rules,
        max_moves=b.max_moves or 2 * b.size * b.size,
        games=games,
        temperature=float(config.pg.temperature),
    )


# The numeric keys of a policy-gradient config (the learner's: ``check_learner``).
PG_RANGES = KeyRanges(
    at_least_one=(
        "pg.games",
        "pg.pool_every",
        "pg.chunk",
        "train.total_steps",
        "train.checkpoint_every",
        "train.keep_checkpoints",
    ),
    at_least_zero=(
        "seed",
        "board.max_moves",
        "init.step",
        "train.max_minutes",
        "train.eval_every",
        "train.plot_every",
    ),
    positive=("pg.temperature",),
)


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` naming the first unknown key or bad value of a ``gojax
    train-pg`` config (before anything is read or written)."""
    check_keys(config, default_pg_config())
    check_board(config)
    check_ranges(config, PG_RANGES)
    check_choice(config, "pg.baseline", BASELINES)
    check_learner(config)
    eval_games = config.train.eval_games
    if eval_games < 2:  # the learner takes Black in half the games and White in the rest
        raise bad_value("train.eval_games", eval_games, "at least 2: one game of each colour")
    model_lib.spec_from_config(config.model)
    learner_config(config)


def _initial_variables(config, spec: model_lib.ModelSpec) -> dict[str, Any] | None:
    """The ``init`` run's network, after checking it is the net this config trains."""
    if not config.init.workdir:
        return None
    run = restore_matching_network(
        config.init.workdir, config.init.step or None, spec, config.board.size, role="init run"
    )
    return run.variables


def _win_rate(z: np.ndarray) -> float:
    return float(np.mean((z > 0) + 0.5 * (z == 0)))


def train_pg(config: ml_collections.ConfigDict, workdir: str | os.PathLike) -> dict[str, Any]:
    """Policy-gradient training in ``workdir`` (resuming if possible).

    Returns ``step``, ``stopped`` (``"total_steps"`` or ``"max_minutes"``),
    ``resumed_from``, ``pool`` (its size) and ``eval`` (the last evaluation
    against the starting policy: ``games``, ``wins``, ``draws``, ``win_rate``,
    ``ci95``).
    """
    check_config(config)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t, p = config.train, config.pg
    spec = model_lib.spec_from_config(config.model)
    lconfig = learner_config(config)
    size = config.board.size
    config_json = config_to_json(config)
    key, key_eval = jax.random.split(jax.random.PRNGKey(config.seed))
    play = make_play(spec, _game(config, p.games))
    play_eval = make_play(spec, _game(config, t.eval_games))
    update = make_update(spec, lconfig, p.chunk, p.games)

    ckpt, restored = open_checkpoints(workdir, t, spec, lconfig, size, config_json)
    if restored is None:
        state = fresh_state(spec, lconfig, key, size, _initial_variables(config, spec))
        initial = jax.device_get({"params": state.params, "batch_stats": state.batch_stats})
        pool = [initial["params"]]
        resumed_from = None
    else:
        state, pool_arrays = restored.state, restored.extra["pool"]
        pool = [pool_arrays[str(i)] for i in range(len(pool_arrays))]
        initial = {"params": pool[0], "batch_stats": jax.device_get(state.batch_stats)}
        resumed_from = restored.step
    record_start(workdir, config_json, resumed_from or 0)
    # The update leaves BN statistics as the start had them: every pool member shares them.
    batch_stats = initial["batch_stats"]

    def save(force: bool) -> None:
        step = int(jax.device_get(state.step))
        if force or ckpt.should_save(step):
            extra = {"pool": {str(i): params for i, params in enumerate(pool)}}
            ckpt.save(step, state, extra=extra, config=config_json, force=force)

    def evaluate_against_start(step: int) -> dict[str, Any]:
        current = {"params": state.params, "batch_stats": state.batch_stats}
        _, results = play_eval(current, initial, jax.random.fold_in(key_eval, step))
        z = np.asarray(results["z"])
        n, rate = z.size, _win_rate(z)
        out = {
            "step": step,
            "opponent": "the starting policy",
            "games": n,
            "wins": int(np.sum(z > 0)),
            "draws": int(np.sum(z == 0)),
            "win_rate": rate,
            "ci95": list(wilson_interval(rate * n, n)),
        }
        write_atomic(workdir / "eval.json", json.dumps(out, indent=2) + "\n")
        return out

    def advance(step: int) -> dict[str, Any]:
        nonlocal state
        opponent_index = int(np.random.default_rng((config.seed, step)).integers(len(pool)))
        opponent = {"params": pool[opponent_index], "batch_stats": batch_stats}
        current = {"params": state.params, "batch_stats": state.batch_stats}
        play_start = time.perf_counter()
        moves, results = play(current, opponent, jax.random.fold_in(key, step))
        advantage = advantages(moves, results["z"], p.baseline)
        state, metrics = update(state, moves, advantage)
        step += 1
        host = jax.device_get({**metrics, **results})
        check_finite({k: host[k] for k in metrics}, step=step)
        z = np.asarray(host["z"])
        record: dict[str, Any] = {f"pg.{k}": float(host[k]) for k in ("loss", "entropy")}
        record.update(
            {
                "learner.grad_norm": float(host["grad_norm"]),
                "learner.learning_rate": float(host["learning_rate"]),
                "pg.win_rate": _win_rate(z),
                "pg.game_length": float(np.mean(host["length"])),
                "pg.opponent": opponent_index,
                "pg.pool_size": len(pool),
                "pg.games_per_second": p.games / (time.perf_counter() - play_start),
            }
        )
        if step % p.pool_every == 0:
            pool.append(jax.device_get(state.params))
        return record

    def evaluate(step: int) -> dict[str, float]:
        nonlocal last_eval
        last_eval = evaluate_against_start(step)
        return {"eval.vs_start.win_rate": last_eval["win_rate"]}

    last_eval = None
    step, stopped = run_steps(
        t,
        int(jax.device_get(state.step)),
        advance,
        evaluate=evaluate,
        save=save,
        ckpt=ckpt,
        metrics=_Metrics(workdir, enabled=True, panels=PG_PANELS),
        unit="iter",
        postfix=lambda record: {"win": f"{record['pg.win_rate']:.2f}"},
    )
    return {
        "step": step,
        "stopped": stopped,
        "resumed_from": resumed_from,
        "pool": len(pool),
        "eval": last_eval,
    }
