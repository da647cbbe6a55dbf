"""Tree search throughput against pgx + mctx, measured in the same run.

The peer is pgx's AlphaZero example (github.com/sotetsuk/pgx, examples/alphazero):
``mctx.gumbel_muzero_policy`` over ``pgx.make("go_9x9")`` states, 32
simulations, Gumbel scale 1, with pgx's ``env.step`` in ``recurrent_fn``. Our
side is ``gojax.search.search(kind="gumbel")`` over ``GoState``. Both sides
run the same network with the same parameters on the same 17-plane AlphaGo
Zero encoding (pgx's observation and ``gojax.agz_planes``), on the same
positions (random games replayed move by move in both engines), so the
difference is the rules engine and the search loop. Sizes:

  b6c64  AlphaGoZeroNet, 6 residual blocks x 64 channels, batch 64
  b1c16  AlphaGoZeroNet, 1 residual block x 16 channels, batch 256

Our rules: ``tromp-taylor`` masks every move that would repeat an earlier
position (positional superko) at every node; ``chinese`` (simple ko, no
suicide) masks what pgx's ``legal_action_mask`` masks -- pgx checks
repetition only after a move is played. b1c16 runs under both.

For each it prints simulations/s, the network alone at the same batch
(``num_simulations + 1`` forward passes per search), each side's overhead
over the network and the ratio ours/pgx; then the time saved by tree reuse
(PUCT, a few moves of self-play with and without ``reuse_subtree``). The
last line is JSON.

    python bench/search.py              # 32 simulations, both sizes
    python bench/search.py --smoke      # seconds, for CI
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp
import mctx
import numpy as np
from _timing import best_times  # bench/_timing.py (scripts run with bench/ on the path)

import gojax
from gojax import nn as gnn
from gojax.atomic import write_atomic
from gojax.search import SearchConfig, agz_evaluator, reuse_subtree, search

SIZES = (  # name, residual blocks, channels, batch, our rules
    ("b6c64", 6, 64, 64, "tromp-taylor"),
    ("b1c16", 1, 16, 256, "tromp-taylor"),
    ("b1c16", 1, 16, 256, "chinese"),
)


def random_games(size: int, batch: int, moves: int, seed: int = 0):
    """``[batch]`` gojax states after ``moves`` random moves, and the ``[batch, moves]`` actions.

    No passes while a point is legal, so that pgx and gojax (whose superko
    rules differ only in what they do about a repetition) agree on every game.
    """

    def one(key):
        state = gojax.new_game(size, komi=7.5, rules="tromp-taylor")

        def step(state, key):
            legal = gojax.legal_moves(state)
            points = legal.at[-1].set(False)
            mask = jnp.where(points.any(), points, legal)
            action = jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))
            return gojax.play(state, action), action

        return jax.lax.scan(step, state, jax.random.split(key, moves))

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), batch))


def replay(size: int, actions: jax.Array, rules: str) -> gojax.GoState:
    """The ``[batch, moves]`` games of :func:`random_games` under other rules (all moves legal)."""

    def one(actions):
        state = gojax.new_game(size, komi=7.5, rules=rules)

        def step(state, action):
            return gojax.play(state, action), gojax.legal_moves(state)[action]

        return jax.lax.scan(step, state, actions)

    states, legal = jax.jit(jax.vmap(one))(actions)
    if not bool(jnp.all(legal)):
        raise RuntimeError(f"a random game has a move illegal under {rules}; use fewer --moves")
    return states


def pgx_states(env, actions: jax.Array):
    """The same games in pgx: ``init`` then ``step`` with each recorded action."""
    batch, moves = actions.shape

    def one(key, actions):
        state = env.init(key)
        state, _ = jax.lax.scan(lambda s, a: (env.step(s, a), None), state, actions)
        return state

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(1), batch), actions)


def pgx_search_fn(env, net, num_simulations: int):
    """pgx's AlphaZero example search (Gumbel MuZero over pgx states), jitted."""

    def recurrent_fn(variables, key, action, state):
        del key
        player = state.current_player
        state = jax.vmap(env.step)(state, action)
        out = net.apply(variables, state.observation.astype(jnp.float32))
        logits = out["policy_logits"] - jnp.max(out["policy_logits"], axis=-1, keepdims=True)
        logits = jnp.where(state.legal_action_mask, logits, jnp.finfo(logits.dtype).min)
        reward = state.rewards[jnp.arange(state.rewards.shape[0]), player]
        value = jnp.where(state.terminated, 0.0, out["value"])
        discount = jnp.where(state.terminated, 0.0, -1.0)
        return mctx.RecurrentFnOutput(
            reward=reward, discount=discount, prior_logits=logits, value=value
        ), state

    @jax.jit
    def run(variables, state, key):
        out = net.apply(variables, state.observation.astype(jnp.float32))
        root = mctx.RootFnOutput(
            prior_logits=out["policy_logits"], value=out["value"], embedding=state
        )
        policy = mctx.gumbel_muzero_policy(
            params=variables,
            rng_key=key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=num_simulations,
            invalid_actions=~state.legal_action_mask,
            qtransform=mctx.qtransform_completed_by_mix_value,
            gumbel_scale=1.0,
        )
        return policy.action, policy.action_weights

    return run


def net_alone_fn(net, calls: int):
    """``calls`` forward passes in one jitted loop, as a search makes them (no dispatch each)."""

    @jax.jit
    def run(variables, planes):
        def body(_, carry):
            # Each pass depends on the previous one, so XLA cannot hoist it out of the loop.
            out = net.apply(variables, planes * (1.0 + 0.0 * carry[:, None, None, None]))
            return out["value"]

        return jax.lax.fori_loop(0, calls, body, jnp.zeros(planes.shape[0], jnp.float32))

    return run


def rules_alone_fns(env, calls: int):
    """What expanding ``B`` nodes ``calls`` times asks of each rules engine, with no search
    and no net: play a move in each position, then the child's legal moves and net input
    (gojax: ``play``, ``legal_moves``, ``agz_planes``; pgx: ``env.step``, which computes
    the legal mask and the observation). ``actions`` is ``[calls, B]``."""

    @jax.jit
    def ours(states, actions):
        def body(i, total):
            children = jax.vmap(gojax.play)(states, actions[i])
            legal = jax.vmap(gojax.legal_moves)(children)
            planes = jax.vmap(gojax.agz_planes)(children)
            return total + jnp.sum(legal) + jnp.sum(planes)

        return jax.lax.fori_loop(0, calls, body, jnp.zeros((), jnp.float32))

    @jax.jit
    def theirs(states, actions):
        def body(i, total):
            children = jax.vmap(env.step)(states, actions[i])
            return total + jnp.sum(children.legal_action_mask) + jnp.sum(children.observation)

        return jax.lax.fori_loop(0, calls, body, jnp.zeros((), jnp.float32))

    return ours, theirs


def ours_search_fn(net, config: SearchConfig):
    @jax.jit
    def run(variables, states, key, tree=None):
        out = search(agz_evaluator(net, variables), states, key, config, tree)
        return out

    return run


def measure_size(name, blocks, channels, batch, rules, args, env) -> dict:
    size, sims = args.size, args.simulations
    net = gnn.AlphaGoZeroNet(num_blocks=blocks, channels=channels, value_hidden=channels)
    variables = net.init(jax.random.key(0), *gnn.example_inputs(net, 1, size))
    states, actions = random_games(size, batch, args.moves)
    if rules != "tromp-taylor":
        states = replay(size, actions, rules)
    peers = pgx_states(env, actions)
    if bool(jnp.any(peers.terminated)):
        raise RuntimeError("a replayed game ended in pgx; use fewer --moves")

    planes = jax.jit(jax.vmap(gojax.agz_planes))(states)
    net_fn = net_alone_fn(net, sims + 1)
    ours = ours_search_fn(net, SearchConfig(kind="gumbel", num_simulations=sims))
    theirs = pgx_search_fn(env, net, sims)
    key = jax.random.key(2)

    # Random legal board moves for the rules-alone timing (legal in both engines).
    legal = jax.vmap(gojax.legal_moves)(states).at[:, -1].set(False)
    draws = jax.random.categorical(
        jax.random.key(3), jnp.where(legal, 0.0, -jnp.inf), shape=(sims + 1, batch)
    )
    rules_ours, rules_pgx = rules_alone_fns(env, sims + 1)
    # Timed in turn, so that ours and pgx's see the same machine conditions.
    t = best_times(
        {
            "net": (net_fn, (variables, planes)),
            "ours": (ours, (variables, states, key)),
            "pgx": (theirs, (variables, peers, key)),
            "rules": (rules_ours, (states, draws)),
            "rules_pgx": (rules_pgx, (peers, draws)),
        },
        repeats=args.repeats,
    )
    t_net = t["net"] / (sims + 1)
    t_ours, t_pgx, t_rules, t_rules_pgx = t["ours"], t["pgx"], t["rules"], t["rules_pgx"]

    net_share = (sims + 1) * t_net  # forward passes one search makes
    row = {
        "net": name,
        "batch": batch,
        "rules": rules,
        "simulations": sims,
        "ours_sims_per_s": batch * sims / t_ours,
        "pgx_sims_per_s": batch * sims / t_pgx,
        "net_alone_sims_per_s": batch / t_net,
        "ours_overhead": 1.0 - net_share / t_ours,
        "pgx_overhead": 1.0 - net_share / t_pgx,
        # The rules engine's share of a search (its expansions alone) and what it leaves:
        # the ratio to pgx if our search loop cost nothing beyond the net and the rules.
        "ours_rules_share": t_rules / t_ours,
        "pgx_rules_share": t_rules_pgx / t_pgx,
        "ratio_ceiling": t_pgx / (net_share + t_rules),
    }
    row["ratio_ours_over_pgx"] = row["ours_sims_per_s"] / row["pgx_sims_per_s"]
    return row


def measure_reuse(args) -> list[dict]:
    """Self-play moves with and without tree reuse (PUCT, most visited move, b6c64)."""
    size, sims = args.size, args.reuse_simulations
    net = gnn.AlphaGoZeroNet(num_blocks=6, channels=64, value_hidden=64)
    variables = net.init(jax.random.key(0), *gnn.example_inputs(net, 1, size))
    config = SearchConfig(num_simulations=sims, temperature_moves=0, dirichlet_fraction=0.0)
    run = ours_search_fn(net, config)
    reuse = jax.jit(reuse_subtree)
    play = jax.jit(jax.vmap(gojax.play))
    rows = []
    for batch in args.reuse_batches:
        start, _ = random_games(size, batch, args.moves)
        timings = {}
        for mode in ("fresh", "reuse"):
            states, tree, seconds, simulations = start, None, [], []
            for move in range(args.reuse_moves + 1):
                key = jax.random.key(100 + move)
                tic = time.perf_counter()
                out = jax.block_until_ready(run(variables, states, key, tree))
                if move > 0:  # the first move compiles
                    seconds.append(time.perf_counter() - tic)
                    simulations.append(float(jnp.mean(out.simulations)))
                states = play(states, out.action)
                tree = reuse(out.tree, out.action) if mode == "reuse" else None
            if mode == "reuse":  # the second call compiled the tree-taking program
                seconds, simulations = seconds[1:], simulations[1:]
            timings[mode] = (float(np.mean(seconds)), float(np.mean(simulations)))
        rows.append(
            {
                "batch": batch,
                "simulations": sims,
                "fresh_s_per_move": timings["fresh"][0],
                "reuse_s_per_move": timings["reuse"][0],
                "reuse_mean_simulations_run": timings["reuse"][1],
                "speedup": timings["fresh"][0] / timings["reuse"][0],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--moves", type=int, default=20, help="random moves before the search")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reuse-simulations", type=int, default=64)
    parser.add_argument("--reuse-moves", type=int, default=6)
    parser.add_argument("--reuse-batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--json", help="also write the JSON summary to this file")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    sizes = SIZES
    if args.smoke:
        args.simulations, args.repeats, args.moves = 8, 1, 6
        args.reuse_simulations, args.reuse_moves, args.reuse_batches = 16, 3, [2]
        # One row: the smoke proves the script end to end; each row costs CI a minute of
        # compiling (pgx's search, ours, the rules alone). The full run has both rule sets.
        sizes = (("b1c16", 1, 16, 8, "chinese"),)

    import pgx

    env = pgx.make(f"go_{args.size}x{args.size}")
    print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), {platform.node()}")
    print(f"Gumbel MuZero search, {args.size}x{args.size}, {args.simulations} simulations")
    header = (
        f"{'net':6} {'batch':>5} {'rules':>12} {'ours sims/s':>12} {'pgx sims/s':>11} {'ratio':>6} "
        f"{'net alone':>10} {'ours ovh':>9} {'pgx ovh':>8} {'rules':>6} {'pgx rules':>9} "
        f"{'ceiling':>7}"
    )
    print(header)
    rows = []
    for name, blocks, channels, batch, rules in sizes:
        row = measure_size(name, blocks, channels, batch, rules, args, env)
        rows.append(row)
        print(
            f"{name:6} {batch:5d} {rules:>12} {row['ours_sims_per_s']:12.0f} "
            f"{row['pgx_sims_per_s']:11.0f} {row['ratio_ours_over_pgx']:6.2f} "
            f"{row['net_alone_sims_per_s']:10.0f} {row['ours_overhead']:9.1%} "
            f"{row['pgx_overhead']:8.1%} {row['ours_rules_share']:6.1%} "
            f"{row['pgx_rules_share']:9.1%} {row['ratio_ceiling']:7.2f}"
        )
    print("(net alone: positions/s of the forward pass at that batch, num_simulations + 1 passes")
    print(" in one jitted loop; overhead: share of the search's time not spent in those passes;")
    print(" rules: share spent by the rules engine alone (play, legal moves, net input, once per")
    print(" expansion); ceiling: ours/pgx if our search cost only the net and the rules)")

    print(f"\ntree reuse, PUCT, b6c64, {args.reuse_simulations} simulations, most visited move")
    print(f"{'batch':>5} {'fresh s/move':>13} {'reuse s/move':>13} {'sims run':>9} {'speedup':>8}")
    reuse_rows = measure_reuse(args)
    for row in reuse_rows:
        print(
            f"{row['batch']:5d} {row['fresh_s_per_move']:13.4f} {row['reuse_s_per_move']:13.4f} "
            f"{row['reuse_mean_simulations_run']:9.1f} {row['speedup']:8.2f}"
        )
    line = json.dumps(
        {
            "bench": "search",
            "backend": jax.default_backend(),
            "size": args.size,
            "smoke": args.smoke,
            "search": rows,
            "reuse": reuse_rows,
        }
    )
    if args.json:
        write_atomic(args.json, line + "\n")
    print(line)


if __name__ == "__main__":
    main()
