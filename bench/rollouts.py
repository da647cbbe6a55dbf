"""Rollout throughput: AlphaGo's fast rollout policy against uniform random moves, in one run.

Both play ``B`` games at once from the empty board to the end
(``gojax.uct.random_rollout``: moves that keep the mover's own eyes, pass
only when nothing else is left, scored by area), one jitted program each;
the fast policy adds its pattern features and a softmax to every move. The
peer is the random rollout measured in the same run: the table's ratio is
what the learned policy costs. The policy's weights are drawn at random
(every pattern weighted, the worst case for nothing: the cost does not
depend on the values), or read from ``--policy``.

    python bench/rollouts.py                # 9x9 and 19x19 (a minute on 2 CPU cores)
    python bench/rollouts.py --smoke        # tiny sizes, seconds

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import jax
import jax.numpy as jnp
from _timing import best_times, cpu_name  # bench/_timing.py (scripts run with bench/ on the path)

import gojax
from gojax import rollout_policy
from gojax._xla_flags import fast_cpu_compiles
from gojax.uct import random_rollout


def _weights(path: str | None) -> rollout_policy.RolloutWeights:
    if path:
        return rollout_policy.load(path)
    keys = jax.random.split(jax.random.key(0), 4)
    return rollout_policy.RolloutWeights(
        pattern=jax.random.normal(keys[0], (rollout_policy.NUM_PATTERNS,)),
        response=jax.random.normal(keys[1], (rollout_policy.NUM_PATTERNS,)),
        last=jax.random.normal(keys[2], (rollout_policy.NUM_OFFSETS,)),
        own_last=jax.random.normal(keys[3], (rollout_policy.NUM_OFFSETS,)),
    )


def measure(size: int, batch: int, weights, repeats: int) -> dict:
    start = gojax.new_game(size, komi=7.0, rules="chinese")
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch, *x.shape)), start)
    key = jax.random.key(1)
    uniform = jax.jit(lambda s, k: random_rollout(s, k, 1))
    fast = jax.jit(lambda s, k, w: random_rollout(s, k, 1, weights=w))
    times = best_times(
        {"random": (uniform, (states, key)), "fast": (fast, (states, key, weights))},
        repeats=repeats,
    )
    return {
        "size": size,
        "batch": batch,
        "random_games_per_s": batch / times["random"],
        "fast_games_per_s": batch / times["fast"],
        "fast_cost": times["fast"] / times["random"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, compiled at XLA level 0: seconds"
    )
    parser.add_argument("--policy", help="a rollout_policy.npz (default: random weights)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.smoke:
        fast_cpu_compiles(os.environ)  # before the first computation starts XLA
    weights = _weights(args.policy)
    cases = [(5, 16)] if args.smoke else [(9, 256), (19, 64)]
    rows = [measure(size, batch, weights, args.repeats) for size, batch in cases]
    backend = jax.default_backend()
    print(f"{cpu_name()}, jax {jax.__version__} ({backend}), Python {platform.python_version()}")
    header = f"{'random games/s':>15} {'fast games/s':>13} {'fast/random time':>17}"
    print(f"{'board':>6} {'B':>5} {header}")
    for r in rows:
        print(
            f"{r['size']:>4}x{r['size']:<1} {r['batch']:>5} {r['random_games_per_s']:>15.1f} "
            f"{r['fast_games_per_s']:>13.1f} {r['fast_cost']:>16.2f}x"
        )
    print(json.dumps({"bench": "rollouts", "rows": rows}))


if __name__ == "__main__":
    main()
