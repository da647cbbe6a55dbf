"""Self-play and learner throughput against pgx's AlphaZero example, measured in the same run.

The peer is pgx's AlphaZero example (github.com/sotetsuk/pgx,
examples/alphazero/train.py): self-play is one jitted ``lax.scan`` over ``T``
steps of ``B`` vmapped ``pgx.make("go_9x9")`` games with auto-reset, each
step one ``mctx.gumbel_muzero_policy`` search (Gumbel scale 1, completed-Q
by mixed value) whose ``recurrent_fn`` steps the pgx env and runs the net;
its value targets are then computed by a reverse scan. Its learner is an
``optax.adam(1e-3)`` step on policy cross-entropy plus masked value L2 loss.
The example's net is a haiku ResNet; here both sides run the same flax
module (a ``train.model`` AlphaGo Zero preset) with the same parameters, on
17 AlphaGo Zero planes (pgx's boolean observation, cast to float32), so the
comparison is the game engine, the search and the data path.

Our side is ``train.selfplay.play_games`` (Gumbel search, tromp-taylor, komi
7.5 as pgx's, the Gumbel noise kept for every move as pgx does; optionally
PUCT) and ``train.learner.make_train_step`` (AdamW without weight decay, so
Adam, plus its L2 term and metrics) on a batch of the same size. Each side
learns from its own self-play positions.

Self-play moves/s counts searched positions: ``B * T`` for the peer (its
games restart as soon as they end) and ``stats["positions"]`` for ours (a
game that ends before ``T`` steps idles in the batch, uncounted, so ours is
a lower bound). "net alone" is the same ``B`` positions through the
``num_simulations + 1`` forward passes of one search in a jitted loop: the
moves/s neither side can beat. Learner samples/s is batch x steps / time of
a few consecutive steps on a batch already on the device.

    python bench/selfplay.py            # B=64, 16 simulations, T=64, agz_tiny (~3 min, 2 cores)
    python bench/selfplay.py --quick    # tiny sizes, about a minute (mostly compiling)
    python bench/selfplay.py --puct     # also our PUCT self-play

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import functools
import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import best_time, cpu_name  # bench/_timing.py (scripts run with bench/ on the path)
from search import net_alone_fn, pgx_search_fn  # bench/search.py: the peer's search

from gojax.atomic import write_atomic
from gojax.nn import count_params
from gojax.search import SearchConfig
from train import model as model_lib
from train.learner import (
    LearnerConfig,
    create_train_state,
    make_mesh,
    make_train_step,
    shard_batch,
)
from train.selfplay import SelfPlayConfig, agz_encode, play_games, selfplay_devices

SIZE = 9
KOMI = 7.5  # pgx's go_9x9
LEARNING_RATE = 1e-3  # the peer's Adam
LEARNER_STEPS = 4  # consecutive learner steps per timed call


# ----------------------------------------------------------------------------
# The peer: pgx env + mctx Gumbel search + Adam, as in pgx's AlphaZero example.


class PeerSamples(NamedTuple):
    """The peer's training samples, ``[T, B, ...]``."""

    obs: jax.Array  # [T, B, N, N, 17] bool: pgx observation before the move
    policy: jax.Array  # [T, B, A] float32: the search's action_weights
    value: jax.Array  # [T, B] float32: discounted return for the mover
    mask: jax.Array  # [T, B] bool: the game ended within the T steps (value is known)
    terminated: jax.Array  # [T, B] bool: a game ended at this step


def peer_selfplay_fn(env, module, batch: int, steps: int, simulations: int):
    """``run(variables, key) -> PeerSamples``: the example's self-play and target computation."""
    from pgx.experimental import auto_reset

    search = pgx_search_fn(env, module, simulations)
    step_env = jax.vmap(auto_reset(env.step, env.init))

    @jax.jit
    def run(variables, key):
        key_init, key_steps = jax.random.split(key)
        states = jax.vmap(env.init)(jax.random.split(key_init, batch))

        def step(states, key):
            key_search, key_reset = jax.random.split(key)
            action, weights = search(variables, states, key_search)
            mover = states.current_player
            after = step_env(states, action, jax.random.split(key_reset, batch))
            reward = after.rewards[jnp.arange(batch), mover]
            # The next position is the opponent's: its value counts negated, 0 after the end.
            discount = jnp.where(after.terminated, 0.0, -1.0)
            return after, (states.observation, weights, reward, after.terminated, discount)

        _, (obs, weights, reward, terminated, discount) = jax.lax.scan(
            step, states, jax.random.split(key_steps, steps)
        )

        def back(future, t):
            value = reward[t] + discount[t] * future
            return value, value

        _, value = jax.lax.scan(back, jnp.zeros(batch), jnp.arange(steps), reverse=True)
        # A move's value is known once its game has ended within the T steps.
        known = jnp.cumsum(terminated[::-1], axis=0)[::-1] >= 1
        return PeerSamples(obs, weights, value, known, terminated)

    return run


def peer_learner_fn(module):
    """``(tx, train)``: Adam and ``train(variables, opt_state, batch) -> (variables, opt_state,
    losses)``, the example's update (one device: ``jit`` for its ``pmap``)."""
    tx = optax.adam(LEARNING_RATE)

    def loss_fn(params, batch_stats, batch):
        out, updates = module.apply(
            {"params": params, "batch_stats": batch_stats},
            batch["obs"].astype(jnp.float32),
            train=True,
            mutable=["batch_stats"],
        )
        policy_loss = optax.softmax_cross_entropy(out["policy_logits"], batch["policy"]).mean()
        value_loss = jnp.mean(optax.l2_loss(out["value"], batch["value"]) * batch["mask"])
        return policy_loss + value_loss, (updates["batch_stats"], policy_loss, value_loss)

    @jax.jit
    def train(variables, opt_state, batch):
        grads, (batch_stats, policy_loss, value_loss) = jax.grad(loss_fn, has_aux=True)(
            variables["params"], variables["batch_stats"], batch
        )
        updates, opt_state = tx.update(grads, opt_state)
        params = optax.apply_updates(variables["params"], updates)
        return {"params": params, "batch_stats": batch_stats}, opt_state, (policy_loss, value_loss)

    return tx, train


# ----------------------------------------------------------------------------
# Measuring.


def _rows(total: int, n: int) -> np.ndarray:
    """``n`` row indices into ``total`` positions (cycling when there are fewer)."""
    return np.resize(np.arange(total), n)


def _flat(x, rows: np.ndarray) -> np.ndarray:
    """``[T, B, ...]`` -> the chosen rows of ``[T * B, ...]``."""
    x = np.asarray(x)
    return x.reshape(-1, *x.shape[2:])[rows]


def selfplay_rate(run, repeats: int) -> tuple[float, dict]:
    """Best moves/s of ``run() -> (positions, result)`` and the result of the last call."""
    last = {}

    def timed():
        positions, result = run()
        last.update(positions=positions, result=result)
        return result

    seconds = best_time(timed, repeats=repeats)
    return last["positions"] / seconds, last


def learner_rate(step, batch_size: int, repeats: int) -> float:
    """Best samples/s of ``LEARNER_STEPS`` calls of ``step() -> metrics`` in a row."""

    def timed():
        for _ in range(LEARNER_STEPS):
            out = step()
        return out

    return batch_size * LEARNER_STEPS / best_time(timed, repeats=repeats)


def measure_gojax(args, spec, variables, kind: str, num_devices: int = 1) -> dict:
    """Our self-play with search ``kind`` on ``num_devices`` local devices (0: all that
    divide the batch), and, for Gumbel on one device, the learner on its positions."""
    cap = 2 * SIZE * SIZE  # gojax's and pgx's move cap
    config = SelfPlayConfig(
        size=SIZE,
        komi=KOMI,
        rules="tromp-taylor",
        num_games=args.batch,
        num_steps=args.steps,
        # Sample (Gumbel: keep the noise; PUCT: by visits) at every move, as pgx's example does.
        search=SearchConfig(kind=kind, num_simulations=args.simulations, temperature_moves=cap),
        num_devices=num_devices,
    )
    evaluator_fn = functools.partial(model_lib.evaluator, spec, model_lib.build(spec))
    key = jax.random.key(1)

    def run():
        traj, stats = play_games(evaluator_fn, agz_encode, variables, key, config)
        return stats["positions"], (traj, stats)

    rate, last = selfplay_rate(run, args.repeats)
    traj, stats = last["result"]
    row = {
        "devices": len(selfplay_devices(config)),
        "selfplay_moves_per_s": rate,
        "positions": int(stats["positions"]),
        "games_finished": int(stats["games_finished"]),
    }
    if kind != "gumbel" or num_devices != 1:
        return row

    lconfig = LearnerConfig(
        optimizer="adamw", learning_rate=LEARNING_RATE, batch_size=args.learner_batch, num_devices=1
    )
    mesh = make_mesh(lconfig)
    module = model_lib.build(spec)
    train_step = make_train_step(spec, module, lconfig, mesh)
    state = create_train_state(spec, lconfig, jax.random.PRNGKey(0), SIZE, mesh)
    rows = _rows(args.steps * args.batch, args.learner_batch)
    batch = {
        "inputs": (_flat(traj.inputs, rows),),  # uint8 planes, as the replay stores them
        "policy": _flat(traj.policy, rows),
        "policy_mask": _flat(traj.policy_mask, rows),
        "value": _flat(traj.value, rows),
        "value_mask": _flat(traj.value_mask, rows),
    }
    batch = shard_batch(batch, mesh)
    box = [state]  # the step donates its state: thread it through the calls

    def step():
        box[0], metrics = train_step(box[0], batch)
        return metrics

    row["learner_samples_per_s"] = learner_rate(step, args.learner_batch, args.repeats)
    return row


def measure_peer(args, env, module, variables) -> dict:
    """The peer's self-play, then its learner on its own positions."""
    run_jit = peer_selfplay_fn(env, module, args.batch, args.steps, args.simulations)
    key = jax.random.key(1)

    def run():
        return args.batch * args.steps, run_jit(variables, key)

    rate, last = selfplay_rate(run, args.repeats)
    samples = last["result"]
    row = {
        "selfplay_moves_per_s": rate,
        "positions": args.batch * args.steps,
        "games_finished": int(np.asarray(samples.terminated).sum()),
    }

    tx, train = peer_learner_fn(module)
    rows = _rows(args.steps * args.batch, args.learner_batch)
    batch = jax.device_put(
        {
            "obs": _flat(samples.obs, rows),
            "policy": _flat(samples.policy, rows),
            "value": _flat(samples.value, rows),
            "mask": _flat(samples.mask, rows).astype(np.float32),
        }
    )
    box = [(variables, tx.init(variables["params"]))]

    def step():
        model, opt_state = box[0]
        model, opt_state, losses = train(model, opt_state, batch)
        box[0] = (model, opt_state)
        return losses

    row["learner_samples_per_s"] = learner_rate(step, args.learner_batch, args.repeats)
    return row


def measure_net_alone(args, module, variables) -> float:
    """Moves/s if a search cost only its ``simulations + 1`` forward passes at batch ``B``."""
    planes = jnp.zeros((args.batch, SIZE, SIZE, 17), jnp.float32).at[..., 16].set(1.0)
    calls = args.simulations + 1
    seconds = best_time(net_alone_fn(module, calls), variables, planes, repeats=args.repeats)
    return args.batch / seconds


# ----------------------------------------------------------------------------
# Command line.


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="B, self-play games in parallel")
    parser.add_argument("--simulations", type=int, default=16, help="simulations per move")
    parser.add_argument("--steps", type=int, default=64, help="T, self-play steps per call")
    parser.add_argument("--learner-batch", type=int, default=256, help="learner batch size")
    parser.add_argument(
        "--preset", default="agz_tiny", help="an AlphaGo Zero net of gojax.nn.PRESETS"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best is kept")
    parser.add_argument("--puct", action="store_true", help="also time our PUCT self-play")
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes, a smoke run (about a minute, compiling)"
    )
    parser.add_argument("--json", help="also write the JSON summary to this file")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.simulations, args.steps = 4, 4, 8
        args.learner_batch, args.repeats = 16, 1
    for name in ("batch", "simulations", "steps", "learner_batch", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, not {getattr(args, name)}")
    try:
        args.spec = model_lib.ModelSpec(args.preset)
    except ValueError as error:
        parser.error(str(error))
    if args.spec.encoder != "agz":
        parser.error(f"--preset {args.preset} is not an AlphaGo Zero net; pgx feeds its 17 planes")
    try:
        pgx_version = __import__("pgx").__version__
    except ImportError:
        parser.error("pgx is not installed (pip install pgx); it is the peer of this benchmark")
    args.pgx_version = pgx_version
    return args


def main() -> None:
    args = parse_args()
    import pgx

    env = pgx.make(f"go_{SIZE}x{SIZE}")
    spec = args.spec
    module = model_lib.build(spec)
    variables = jax.jit(lambda: model_lib.init_variables(spec, jax.random.PRNGKey(0), SIZE))()
    device = jax.devices()[0]
    print(
        f"gojax self-play benchmark: {device.platform} ({device.device_kind}), {cpu_name()}; "
        f"jax {jax.__version__}, pgx {args.pgx_version}"
    )
    print(
        f"{SIZE}x{SIZE}, B={args.batch} games x T={args.steps} steps, "
        f"{args.simulations} simulations, net {args.preset} "
        f"({count_params(module, SIZE):,} parameters), learner batch {args.learner_batch}, "
        f"best of {args.repeats}"
    )

    # One device each (pgx's example would pmap over several): the comparison is per device.
    ours = measure_gojax(args, spec, variables, "gumbel")
    peer = measure_peer(args, env, module, variables)
    puct = measure_gojax(args, spec, variables, "puct") if args.puct else None
    # With several local devices (e.g. XLA_FLAGS=--xla_force_host_platform_device_count=2
    # on a 2-core CPU, one device per core) also our self-play split over all of them.
    spread = None
    if jax.local_device_count() > 1:
        spread = measure_gojax(args, spec, variables, "gumbel", num_devices=0)
    net_alone = measure_net_alone(args, module, variables)

    header = f"{'':24} {'gojax':>10} {'pgx+mctx':>10} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    lines = [
        ("self-play moves/s", "selfplay_moves_per_s"),
        ("learner samples/s", "learner_samples_per_s"),
    ]
    for label, key in lines:
        print(f"{label:24} {ours[key]:>10,.0f} {peer[key]:>10,.0f} {ours[key] / peer[key]:>6.2f}x")
    if puct is not None:
        rate = puct["selfplay_moves_per_s"]
        print(f"{'self-play moves/s, PUCT':24} {rate:>10,.0f} {'(gumbel)':>10} ", end="")
        print(f"{rate / peer['selfplay_moves_per_s']:>6.2f}x")
    if spread is not None:
        label = f"self-play, {spread['devices']} devices"
        rate = spread["selfplay_moves_per_s"]
        gain = rate / ours["selfplay_moves_per_s"]
        print(f"{label:24} {rate:>10,.0f} {'(1 device)':>10} {gain:>6.2f}x")
    print(f"{'net alone, moves/s':24} {net_alone:>10,.0f} {'(same)':>10}")
    print(
        f"(searched positions: gojax {ours['positions']:,}, pgx {peer['positions']:,}; "
        f"games ended: gojax {ours['games_finished']}, pgx {peer['games_finished']})"
    )
    summary = {
        "bench": "selfplay",
        "backend": jax.default_backend(),
        "device": device.device_kind,
        "cpu": cpu_name(),
        "jax": jax.__version__,
        "pgx_version": args.pgx_version,
        "quick": args.quick,
        "settings": {
            "size": SIZE,
            "batch": args.batch,
            "simulations": args.simulations,
            "steps": args.steps,
            "preset": args.preset,
            "learner_batch": args.learner_batch,
            "learner_steps_per_timing": LEARNER_STEPS,
            "repeats": args.repeats,
        },
        "gojax": ours,
        "pgx": peer,
        "gojax_puct": puct,
        "gojax_all_devices": spread,
        "net_alone_moves_per_s": net_alone,
        "ratio_selfplay": ours["selfplay_moves_per_s"] / peer["selfplay_moves_per_s"],
        "ratio_learner": ours["learner_samples_per_s"] / peer["learner_samples_per_s"],
    }
    line = json.dumps(summary)
    if args.json:
        write_atomic(args.json, line + "\n")
    print(line)


if __name__ == "__main__":
    main()
