"""Network evaluation throughput against the machine's own matmul peak.

Times, for a KataGo-family net on 19x19 (or --size) positions from random play:
  features  KataGo's 22 + 19 inputs (ladders, pass-alive area, ...) per batch,
  net       the forward pass alone,
  evaluate  features + net + post-processing, as search calls it,
and reports positions/s, the net's achieved FLOP/s (XLA's own FLOP count) and
its ratio to a float32 matmul measured in the same run (the machine's peak
for dense work on this backend).

    python bench/network.py                  # b6c96, batches 8 and 64
    python bench/network.py --preset b18c384 --batch 256
    python bench/network.py --smoke          # seconds, for CI
    python bench/network.py --model g170-b6c96.bin.gz   # a real KataGo file
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import gojax
from gojax import nn as gnn
from gojax.evaluate import batch_inputs, evaluate


def best_time(fn, *args, repeats: int) -> float:
    """Best wall time of ``fn(*args)`` over ``repeats`` runs, after one compile run."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def matmul_peak(n: int, repeats: int) -> float:
    """FLOP/s of an ``n x n`` float32 matmul on the default device."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
    seconds = best_time(jax.jit(jnp.matmul), a, b, repeats=repeats)
    return 2.0 * n**3 / seconds


def random_positions(size: int, batch: int, moves: int, seed: int = 0) -> gojax.GoState:
    """``[batch]`` states after ``moves`` random legal moves (no passes while avoidable)."""

    def one(key):
        state = gojax.new_game(size, rules="tromp-taylor")

        def step(state, key):
            legal = gojax.legal_moves(state)
            board_moves = legal.at[-1].set(False)
            mask = jnp.where(board_moves.any(), board_moves, legal)
            action = jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))
            return gojax.play(state, action), None

        state, _ = jax.lax.scan(step, state, jax.random.split(key, moves))
        return state

    return jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(seed), batch))


def net_flops(apply, variables, spatial, global_features) -> float:
    cost = apply.lower(variables, spatial, global_features).compile().cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0]
    return float(cost.get("flops", float("nan"))) if cost else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="b6c96", choices=sorted(gnn.PRESETS))
    parser.add_argument("--model", help="a KataGo .bin.gz file instead of a preset")
    parser.add_argument("--size", type=int, default=19)
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--moves", type=int, default=120, help="random moves per position")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.smoke:
        args.preset, args.size, args.batch, args.moves, args.repeats = "tiny", 9, [4], 20, 1

    if args.model:
        from gojax.katago_model import load_model

        model = load_model(args.model)
        net, variables, version, name = model.module(), model.variables, model.version, model.name
    else:
        net = gnn.PRESETS[args.preset]()
        spatial0, global0 = gnn.example_inputs(net, 1, args.size)
        variables = net.init(jax.random.key(0), spatial0, global0)
        version, name = 8, args.preset
    params = sum(x.size for x in jax.tree.leaves(variables["params"]))

    peak = matmul_peak(256 if args.smoke else 2048, args.repeats)
    device = jax.devices()[0]
    print(f"{name}: {params:,} parameters; {args.size}x{args.size}; device {device.device_kind}")
    print(f"float32 matmul peak measured here: {peak / 1e9:,.1f} GFLOP/s")
    header = (
        f"{'batch':>6} {'features/s':>12} {'net pos/s':>11} {'evaluate/s':>11} "
        f"{'net GFLOP/s':>12} {'of peak':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    apply = jax.jit(functools.partial(net.apply, train=False))
    features = jax.jit(batch_inputs)
    full = jax.jit(functools.partial(evaluate, net, version=version, symmetry=0))
    for batch in args.batch:
        states = random_positions(args.size, batch, args.moves)
        spatial, global_features = features(states)
        t_features = best_time(features, states, repeats=args.repeats)
        t_net = best_time(apply, variables, spatial, global_features, repeats=args.repeats)
        t_eval = best_time(full, variables, states, repeats=args.repeats)
        flops = net_flops(apply, variables, spatial, global_features)
        achieved = flops / t_net
        row = {
            "batch": batch,
            "features_per_s": batch / t_features,
            "net_positions_per_s": batch / t_net,
            "evaluate_per_s": batch / t_eval,
            "net_gflops": achieved / 1e9,
            "fraction_of_matmul_peak": achieved / peak,
        }
        rows.append(row)
        print(
            f"{batch:>6} {row['features_per_s']:>12,.0f} {row['net_positions_per_s']:>11,.0f} "
            f"{row['evaluate_per_s']:>11,.0f} {row['net_gflops']:>12,.1f} "
            f"{row['fraction_of_matmul_peak']:>8.1%}"
        )
    result = {
        "benchmark": "network",
        "net": name,
        "size": args.size,
        "device": device.device_kind,
        "platform": platform.platform(),
        "matmul_peak_gflops": peak / 1e9,
        "rows": rows,
    }
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
