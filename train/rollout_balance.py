"""``gojax balance-rollout``: fit the fast rollout policy for balance, not for accuracy.

A rollout policy fitted to expert moves (``gojax train-rollout``) plays
plausible moves, yet its rollouts value positions little better than
uniform random play (docs/papers/alphago.md): what matters is not that each move is
good but that the errors of the two sides cancel over a game. Simulation
balancing (Silver and Tesauro 2009, "Monte-Carlo simulation balancing";
Huang, Coulom and Lin 2010) fits the weights ``theta`` so that the mean
rollout outcome from a position matches a target value ``V*``:

    minimise  1/2 E_s [(V*(s) - V_theta(s))^2],   V_theta(s) = E[z | s, theta]

with the policy-gradient identity ``grad V_theta(s) = E[(z - b) sum_t grad log
pi_theta(a_t | s_t)]`` over the moves of both sides (``b``: any baseline not
depending on the game; here an independent estimate of ``V_theta(s)``). A
step takes ``train.positions`` training positions and plays, from each,

* ``train.rollouts`` games whose mean is ``V_theta(s)`` (and the baseline);
* ``train.rollouts`` more, independently, whose moves are recorded and then
  replayed under ``jax.grad`` to accumulate ``sum_t grad log pi``;

the product of two independent estimates is an unbiased estimate of the
gradient (the paper's Algorithm 1). Adam or plain gradient descent
(``train.optimizer``) follows it, plus an L2 pull
towards the starting weights.

``V*`` here is a KataGo network's value of the position (``white_win -
white_loss`` for the player to move), on positions drawn from the games of
an SGF folder as ``gojax value-mse`` draws them; the first
``data.holdout_games`` usable games are held out. The run is judged on the
held-out positions: the mean squared error of ``eval.rollouts`` rollouts'
mean against ``V*`` (what is fitted) and against the games' results (what
``gojax value-mse`` measures), before training, during it and at the end.

Outputs in the workdir: ``rollout_policy.npz`` (the balanced weights, for
every ``--rollout-policy`` and ``search.rollout_policy``), ``eval.json``,
``metrics.jsonl``, ``learning_curve.png``, ``config.json`` and
``checkpoint.npz`` (weights, optimiser state and step, atomic; a stopped run
resumes from it).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from gojax import GoState, play, rollout_policy, winner
from gojax.atomic import write_atomic
from gojax.rollout_policy import RolloutWeights
from gojax.rollout_policy import logits as policy_logits
from gojax.uct import random_rollout, rollout_moves
from train.loop import _check_resumable, _flatten, _Metrics, config_to_json
from train.positions import (
    load_games,
    replay_positions,
    rollout_outcomes,
    sample_positions,
    value_estimates,
)
from train.provenance import record_start
from train.rollout_policy import _NoAsyncSaves, _restore_checkpoint, checkpoint_saver
from train.steps import run_steps

__all__ = [
    "balance_gradient",
    "balance_rollout",
    "check_config",
    "default_balance_config",
    "only_tables",
    "record_rollouts",
    "replay_log_likelihood_grad",
]

OPTIMIZERS = {"adam": optax.adam, "sgd": optax.sgd}
PANELS = (  # the learning curve's four panels
    ("held-out MSE: against V*, against the results", ("holdout.mse_target", "holdout.mse_result")),
    ("training batch: (V* - V)^2", ("train.squared_error",)),
    ("gradient norm", ("train.grad_norm",)),
    ("distance from the start", ("weight_shift",)),
)


def default_balance_config() -> ml_collections.ConfigDict:
    """Every key a balancing config has; ``configs/balance_*.py`` start from this.

    Groups: ``data`` (the SGF folder, the start policy, the value net, the
    positions), ``train`` (steps, batch, optimiser, saving), ``eval`` (the
    held-out judgement).
    """
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.data = ml_collections.ConfigDict(
        dict(
            sgf_dir="",  # required: the games whose positions are balanced
            init="",  # required: the starting rollout_policy.npz (gojax train-rollout's)
            model="",  # required: a KataGo model file whose value is the target V*
            holdout_games=16,  # usable games kept out for evaluation (the first, by name)
            max_games=0,  # 0: every usable game of the folder
            positions_per_game=2,  # positions drawn per game in each bucket of moves
            bucket_width=10,
        )
    )
    c.train = ml_collections.ConfigDict(
        dict(
            total_steps=200,
            positions=32,  # positions a step
            rollouts=8,  # games a position for V, and as many for the gradient
            # the weight tables balanced (the others keep the start's values): gojax.
            # rollout_policy.RolloutWeights fields pattern, response, last, own_last
            tables=("pattern", "response", "last", "own_last"),
            optimizer="adam",  # or "sgd": steps in proportion to the gradient, as the paper's
            learning_rate=0.01,
            l2=0.0,  # pull towards the starting weights (summed squares)
            max_minutes=0.0,  # 0: no time limit
            checkpoint_every=50,
            eval_every=50,  # steps between evaluations (0: only at the end)
            plot_every=50,
            progress=True,
        )
    )
    c.eval = ml_collections.ConfigDict(dict(rollouts=16, max_positions=512, batch=1024))
    return c


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` naming the first unknown key or bad value."""
    known, given = _flatten(default_balance_config()), _flatten(config)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"unknown balancing config keys {unknown}")
    for key in ("sgf_dir", "init", "model"):
        if not config.data[key]:
            flag = {"sgf_dir": "--sgf-dir", "init": "--init", "model": "--model"}[key]
            raise ValueError(f"data.{key} is required ({flag})")
    d, t = config.data, config.train
    if d.holdout_games < 1:
        raise ValueError("data.holdout_games must be at least 1: the run is judged on them")
    if d.max_games < 0:
        raise ValueError(f"data.max_games must be >= 0, not {d.max_games}")
    for group, name in (
        ("data", "positions_per_game"),
        ("data", "bucket_width"),
        ("train", "total_steps"),
        ("train", "positions"),
        ("train", "rollouts"),
        ("eval", "rollouts"),
        ("eval", "max_positions"),
        ("eval", "batch"),
    ):
        if config[group][name] < 1:
            raise ValueError(f"{group}.{name} must be >= 1, not {config[group][name]}")
    if not t.learning_rate > 0:
        raise ValueError(f"train.learning_rate must be > 0, not {t.learning_rate}")
    fields = RolloutWeights._fields
    if not t.tables or any(name not in fields for name in t.tables):
        raise ValueError(f"train.tables must name some of {fields}, not {tuple(t.tables)}")
    if t.optimizer not in OPTIMIZERS:
        raise ValueError(f"train.optimizer must be one of {tuple(OPTIMIZERS)}, not {t.optimizer!r}")
    if t.l2 < 0:
        raise ValueError(f"train.l2 must be >= 0, not {t.l2}")


# ----------------------------------------------------------------------------
# The gradient: rollouts whose moves are recorded, replayed under jax.grad.


def _allowed_logits(weights: RolloutWeights, games: GoState) -> jax.Array:
    """``[G, P + 1]`` the policy's logits over each game's rollout move set (else -inf).

    A finished game is given the pass alone, so that its log-probabilities
    stay finite (its moves are never counted).
    """
    allowed = jax.vmap(rollout_moves)(games)
    allowed = allowed.at[:, -1].set(allowed[:, -1] | games.terminated)
    points = jax.vmap(policy_logits, in_axes=(None, 0))(weights, games)
    preference = jnp.pad(points, ((0, 0), (0, 1)))  # pass: only when nothing else is allowed
    return jnp.where(allowed, preference, -jnp.inf)


@jax.jit
def record_rollouts(
    weights: RolloutWeights, games: GoState, key: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Play ``[G]`` games out with the rollout policy, recording every move.

    Returns ``(actions [T, G] int32, steps, outcome [G])``: the moves (pass
    once a game is over; ``T`` is the games' move cap, more than any game has
    left), how many steps were played, and the result for the player to move
    in ``games`` (+1 win, -1 loss, 0 draw), as ``gojax.uct.random_rollout``
    scores it.
    """
    pass_move = games.board.shape[-1]
    max_steps = games.max_moves

    def cond(carry):
        games, _, _, t = carry
        return ~jnp.all(games.terminated) & (t < max_steps)

    def body(carry):
        games, actions, key, t = carry
        key, draw = jax.random.split(key)
        chosen = jax.random.categorical(draw, _allowed_logits(weights, games))
        chosen = jnp.where(games.terminated, pass_move, chosen).astype(jnp.int32)
        return jax.vmap(play)(games, chosen), actions.at[t].set(chosen), key, t + 1

    size = games.to_play.shape[0]
    actions = jnp.full((max_steps, size), pass_move, jnp.int32)
    final, actions, _, steps = jax.lax.while_loop(
        cond, body, (games, actions, key, jnp.asarray(0, jnp.int32))
    )
    outcome = jax.vmap(winner)(final).astype(jnp.float32) * games.to_play.astype(jnp.float32)
    return actions, steps, outcome


@jax.jit
def replay_log_likelihood_grad(
    weights: RolloutWeights,
    games: GoState,
    actions: jax.Array,
    steps: jax.Array,
    coefficients: jax.Array,
) -> RolloutWeights:
    """``grad_theta sum_g coefficients[g] sum_t log pi_theta(actions[t, g] | s_t^g)``.

    Replays the recorded moves ``actions [T, G]`` of ``record_rollouts`` from
    ``games`` for ``steps`` steps; moves after a game's end are not counted.
    """

    def body(t, carry):
        games, total = carry
        moves = actions[t]
        live = ~games.terminated

        def objective(w):
            logp = jax.nn.log_softmax(_allowed_logits(w, games), axis=-1)
            chosen = jnp.take_along_axis(logp, moves[:, None], axis=1)[:, 0]
            return jnp.sum(jnp.where(live, coefficients * chosen, 0.0))

        grad = jax.grad(objective)(weights)
        return jax.vmap(play)(games, moves), jax.tree.map(jnp.add, total, grad)

    zero = jax.tree.map(jnp.zeros_like, weights)
    _, total = jax.lax.fori_loop(0, steps, body, (games, zero))
    return total


@functools.partial(jax.jit, static_argnames=("rollouts",))
def balance_gradient(
    weights: RolloutWeights, states: GoState, targets: jax.Array, key: jax.Array, rollouts: int
) -> tuple[RolloutWeights, jax.Array]:
    """The gradient of ``1/2 mean_s (V*(s) - V(s))^2`` over ``[S]`` positions, and ``V``.

    ``targets [S]``: ``V*`` for the player to move. ``V(s)``: the mean of
    ``rollouts`` games from ``s``; its gradient is estimated from as many
    other games, ``(z - V(s)) sum_t grad log pi`` (``V(s)`` as the baseline).
    Returns ``(gradient, V [S])``.
    """
    count = targets.shape[0]
    key_value, key_grad = jax.random.split(key)
    value = random_rollout(states, key_value, rollouts, weights=weights)  # [S]
    games = jax.tree.map(lambda x: jnp.repeat(x, rollouts, axis=0), states)  # [S * R]
    actions, steps, outcome = record_rollouts(weights, games, key_grad)
    error = jnp.repeat(targets - value, rollouts)
    baseline = jnp.repeat(value, rollouts)
    coefficients = -error * (outcome - baseline) / (rollouts * count)
    grad = replay_log_likelihood_grad(weights, games, actions, steps, coefficients)
    return grad, value


def only_tables(grad: RolloutWeights, tables: tuple[str, ...]) -> RolloutWeights:
    """``grad`` with every table not named in ``tables`` zeroed (those weights stay put)."""
    return grad._replace(
        **{n: jnp.zeros_like(g) for n, g in grad._asdict().items() if n not in tables}
    )


# ----------------------------------------------------------------------------
# Positions and their targets.


def _load_positions(config) -> dict[str, Any]:
    """The held-out and training positions: states, ``V*`` and results for the mover."""
    from gojax.evaluate import make_evaluator
    from gojax.katago_model import load_model

    d = config.data
    games, skipped = load_games(d.sgf_dir, max_games=d.max_games or None)
    if len(games) <= d.holdout_games:
        reasons = ", ".join(f"{n} {why}" for why, n in skipped.most_common()) or "none skipped"
        raise ValueError(
            f"{d.sgf_dir}: {len(games)} usable games ({reasons}), not more than "
            f"data.holdout_games={d.holdout_games}: nothing left to train on"
        )
    kinds = {(g.size, g.rules) for g in games}
    if len(kinds) > 1:
        raise ValueError(f"{d.sgf_dir}: games of several sizes or rule sets {sorted(kinds)}")
    model = load_model(d.model)
    run = make_evaluator(model)
    variables = jax.device_put(model.variables)
    rng = np.random.default_rng(config.seed)
    key = jax.random.key(config.seed)
    out = {}
    for split, part in (("holdout", games[: d.holdout_games]), ("train", games[d.holdout_games :])):
        game_of, move_of = sample_positions(
            [g.length for g in part], width=d.bucket_width, per_game=d.positions_per_game, rng=rng
        )
        if split == "holdout" and game_of.size > config.eval.max_positions:
            keep = np.sort(rng.choice(game_of.size, config.eval.max_positions, replace=False))
            game_of, move_of = game_of[keep], move_of[keep]
        states = replay_positions(part, game_of, move_of, config.eval.batch)
        movers = np.asarray(states.to_play).astype(np.float32)
        targets = value_estimates(
            run, variables, states, jax.random.fold_in(key, len(out)), batch=config.eval.batch
        )
        results = np.asarray([part[g].outcome for g in game_of], np.float32) * movers
        out[split] = {"states": states, "targets": targets, "results": results}
    out["games"] = {"holdout": d.holdout_games, "train": len(games) - d.holdout_games}
    out["model"] = model.name
    return out


def evaluate_rollouts(
    weights: RolloutWeights, split: dict[str, Any], key: jax.Array, rollouts: int, batch: int
) -> dict[str, float]:
    """Mean squared error of ``rollouts`` games' mean against ``V*`` and against the results."""
    outcomes = rollout_outcomes(split["states"], key, rollouts, batch=batch, weights=weights)
    mean = outcomes.mean(axis=1, dtype=np.float64)
    return {
        "mse_target": float(np.mean((mean - split["targets"]) ** 2)),
        "mse_result": float(np.mean((mean - split["results"]) ** 2)),
        "positions": int(mean.size),
    }


# ----------------------------------------------------------------------------
# The run.


def _shift(weights: RolloutWeights, start: RolloutWeights) -> jax.Array:
    return sum(jnp.sum(jnp.square(w - s)) for w, s in zip(weights, start, strict=True))


@functools.partial(jax.jit, static_argnames=("optimizer",))
def _apply(weights, opt_state, grad, start, l2: float, optimizer):
    grad = jax.tree.map(lambda g, w, s: g + 2.0 * l2 * (w - s), grad, weights, start)
    updates, opt_state = optimizer.update(grad, opt_state, weights)
    return optax.apply_updates(weights, updates), opt_state


def balance_rollout(
    config: ml_collections.ConfigDict, workdir: str | os.PathLike
) -> dict[str, Any]:
    """Balance the rollout policy; returns what ``eval.json`` holds."""
    workdir = Path(workdir)
    check_config(config)
    config_json = config_to_json(config)
    train = config.train
    start = rollout_policy.load(config.data.init)
    optimizer = OPTIMIZERS[train.optimizer](train.learning_rate)
    weights, opt_state = start, optimizer.init(start)
    checkpoint = workdir / "checkpoint.npz"
    step = 0
    if checkpoint.exists():  # before the slow part: a bad resume fails fast
        step, (weights, opt_state), saved = _restore_checkpoint(checkpoint, (weights, opt_state))
        _check_resumable(saved, config_json, workdir, step, where=checkpoint)
    data = _load_positions(config)
    held, training = data["holdout"], data["train"]
    count = training["targets"].shape[0]
    targets_all = jnp.asarray(training["targets"])  # once, not at every step
    tables = tuple(train.tables)
    workdir.mkdir(parents=True, exist_ok=True)
    record_start(workdir, config_json, step)
    metrics = _Metrics(workdir, True, panels=PANELS)
    eval_key = jax.random.key(config.seed + 1)  # the same games each time: comparable numbers

    def judge(w) -> dict[str, float]:
        return evaluate_rollouts(w, held, eval_key, config.eval.rollouts, config.eval.batch)

    before = judge(start)
    if step == 0:
        metrics.write({"step": 0, **{f"holdout.{k}": v for k, v in before.items()}})
    state = {"weights": weights, "opt_state": opt_state, "step": step, "saved": step}

    def advance(current: int) -> dict[str, Any]:
        rng = np.random.default_rng([config.seed, current])
        index = jnp.asarray(rng.choice(count, min(train.positions, count), replace=False))
        states = jax.tree.map(lambda x: x[index], training["states"])
        targets = targets_all[index]
        key = jax.random.fold_in(jax.random.key(config.seed), current)
        grad, value = balance_gradient(state["weights"], states, targets, key, train.rollouts)
        grad = only_tables(grad, tables)
        state["weights"], state["opt_state"] = _apply(
            state["weights"], state["opt_state"], grad, start, train.l2, optimizer
        )
        state["step"] = current + 1
        return {
            "train.squared_error": float(jnp.mean(jnp.square(targets - value))),
            "train.grad_norm": float(jnp.sqrt(sum(jnp.sum(g * g) for g in grad))),
        }

    def evaluate(current: int) -> dict[str, Any]:
        del current
        state["held"] = judge(state["weights"])
        shift = float(jnp.sqrt(_shift(state["weights"], start)))
        return {f"holdout.{k}": v for k, v in state["held"].items()} | {"weight_shift": shift}

    step, stopped = run_steps(
        train,
        step,
        advance,
        evaluate=evaluate,
        save=checkpoint_saver(checkpoint, config_json, state, train.checkpoint_every),
        ckpt=_NoAsyncSaves(),
        metrics=metrics,
        unit="step",
        postfix=lambda r: (
            {"err": f"{r['train.squared_error']:.3f}"} if "train.squared_error" in r else {}
        ),
    )
    after = state["held"]
    rollout_policy.save(
        workdir / "rollout_policy.npz",
        state["weights"],
        balanced_from=str(config.data.init),
        target=data["model"],
        step=str(step),
        holdout_mse_target=f"{after['mse_target']:.4f}",
    )
    summary = {
        "step": step,
        "stopped": stopped,
        "games": data["games"],
        "positions": {"train": int(count), "holdout": after["positions"]},
        "target": data["model"],
        "eval_rollouts": config.eval.rollouts,
        "holdout": {"start": before, "balanced": after},
        "holdout_value_net_mse_result": float(np.mean((held["targets"] - held["results"]) ** 2)),
    }
    write_atomic(workdir / "eval.json", json.dumps(summary, indent=2))
    return summary
