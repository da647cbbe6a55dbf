"""Arena throughput: games at batch 256 against the same games played one at a time.

Both agents are AlphaGo Zero's tiny net (``agz_tiny``, 2 residual blocks x 16
channels, two different random initialisations) with a PUCT search of
``--simulations`` simulations, no root noise, on 9x9 with komi 7 and a
120-move cap. Rows:

  batch 256   ``train.arena.play_arena`` on 256 games in one jitted scan (each
              search is a vmapped batch of one, so a game depends only on its
              own key)
  batch 2     the first ``--single`` of those games, one colour pair per call:
              each search is then a batch of one (the same games, checked:
              the arena's results do not depend on the batch size)
  shared key  256 games with one batched search per move and one key for the
              whole batch (what a batch-invariant arena gives up)
  N devices   the batch-256 games split over the process's N devices (only with
              several, e.g. XLA_FLAGS=--xla_force_host_platform_device_count=2 on a
              2-core CPU; checked: the same games)

Each row is timed on a second call with the program already compiled; the
compile time of the first call is printed beside it. The last line is JSON.

    python bench/arena.py                  # 8 simulations, 256 games, 4 games in pairs
    python bench/arena.py --smoke          # seconds, for CI
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time

import jax
import numpy as np
from jax.sharding import Mesh

from gojax.atomic import write_atomic
from gojax.search import SearchConfig, search
from train.agents import search_agent
from train.arena import GAMES_AXIS, Agent, play_arena
from train.model import ModelSpec, build, evaluator, init_variables

SIZE, KOMI, MAX_MOVES = 9, 7.0, 120


def shared_key_agent(spec: ModelSpec, variables, config: SearchConfig, name: str) -> Agent:
    """The net searching all its games in one batch with the first game's key."""
    module = build(spec)

    def policy(params, states, keys):
        out = search(evaluator(spec, module, params), states, keys[0], config)
        return out.action, out.root_value

    return Agent(name, policy, variables, has_value=True)


def timed(play) -> tuple[float, float, object]:
    """``(first call seconds, second call seconds, second result)``."""
    start = time.perf_counter()
    play(0)
    first = time.perf_counter() - start
    start = time.perf_counter()
    result = play(1)
    return first, time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=8)
    parser.add_argument("--games", type=int, default=256, help="games of the batched rows")
    parser.add_argument("--single", type=int, default=4, help="games played a pair at a time")
    parser.add_argument("--json", help="also write the JSON summary to this file")
    parser.add_argument("--smoke", action="store_true", help="5x5-sized run in seconds")
    args = parser.parse_args()
    size, games, single, moves = SIZE, args.games, args.single, MAX_MOVES
    if args.smoke:
        size, games, single, moves = 5, 8, 2, 30

    spec = ModelSpec("agz_tiny")
    config = SearchConfig(
        num_simulations=args.simulations, temperature_moves=0, dirichlet_fraction=0.0
    )
    vars_a = init_variables(spec, jax.random.PRNGKey(1), size)
    vars_b = init_variables(spec, jax.random.PRNGKey(2), size)
    net_a = search_agent(spec, vars_a, config, name="a")
    net_b = search_agent(spec, vars_b, config, name="b")
    arena = functools.partial(play_arena, size=size, komi=KOMI, max_moves=moves)

    def batched(seed, a=net_a, b=net_b):
        return arena(a, b, jax.random.PRNGKey(seed), num_games=games)

    def pair_at_a_time(seed):
        return [
            arena(net_a, net_b, jax.random.PRNGKey(seed), num_games=2, first_game=2 * j)
            for j in range(single // 2)
        ]

    rows = []
    first, second, result = timed(batched)
    rows.append((f"batch {games}", games, int(result.length.sum()), first, second))
    first, second, parts = timed(pair_at_a_time)
    for j, part in enumerate(parts):  # the same games as the batched run
        same = np.array_equal(
            part.actions, result.actions[2 * j : 2 * j + 2, : part.actions.shape[1]]
        )
        assert same, "a pair played alone differs from the same pair in the batch"
    moves_single = sum(int(p.length.sum()) for p in parts)
    rows.append(("batch 2", 2 * len(parts), moves_single, first, second))
    shared_a = shared_key_agent(spec, vars_a, config, "a")
    shared_b = shared_key_agent(spec, vars_b, config, "b")
    first, second, shared = timed(functools.partial(batched, a=shared_a, b=shared_b))
    rows.append(("shared key", games, int(shared.length.sum()), first, second))
    if len(jax.local_devices()) > 1:  # e.g. XLA_FLAGS=--xla_force_host_platform_device_count=2
        mesh = Mesh(np.asarray(jax.local_devices()), (GAMES_AXIS,))
        first, second, spread = timed(
            lambda seed: arena(net_a, net_b, jax.random.PRNGKey(seed), num_games=games, mesh=mesh)
        )
        assert np.array_equal(spread.actions, result.actions), "devices changed the games"
        name = f"{mesh.devices.size} devices"
        rows.append((name, games, int(spread.length.sum()), first, second))

    device = jax.devices()[0]
    print(
        f"{size}x{size} agz_tiny vs agz_tiny, PUCT {args.simulations} simulations, "
        f"cap {moves} moves; {device.platform} ({platform.processor() or device.device_kind})"
    )
    print(
        f"{'row':<12}{'games':>6}{'moves':>8}{'compile+run s':>15}{'run s':>8}"
        f"{'games/s':>9}{'moves/s':>9}"
    )
    rates = {}
    for name, n, m, first, second in rows:
        rates[name] = (n / second, m / second)
        print(
            f"{name:<12}{n:>6}{m:>8}{first:>15.1f}{second:>8.2f}"
            f"{n / second:>9.2f}{m / second:>9.0f}"
        )
    batch_name = rows[0][0]
    ratio_pair = rates[batch_name][0] / rates["batch 2"][0]
    ratio_shared = rates[batch_name][0] / rates["shared key"][0]
    print(f"games/s {batch_name} / batch 2: {ratio_pair:.1f}x")
    print(f"games/s {batch_name} / shared key: {ratio_shared:.2f}x")
    line = json.dumps(
        {
            "size": size,
            "simulations": args.simulations,
            "rows": [
                {"row": r[0], "games": r[1], "moves": r[2], "first_s": r[3], "run_s": r[4]}
                for r in rows
            ],
            "ratio_batch_vs_pair": ratio_pair,
            "ratio_batch_vs_shared_key": ratio_shared,
            "mean_length": float(np.mean(result.length)),
        }
    )
    if args.json:
        write_atomic(args.json, line + "\n")
    print(line)


if __name__ == "__main__":
    main()
