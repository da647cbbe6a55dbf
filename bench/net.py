"""Network evaluation throughput against the machine's own float32 matmul rate.

For a KataGo-family net (b6c96 by default) on positions from random play, per
board size and batch:
  net       evaluations/s of the forward pass alone, the FLOPs per evaluation
            (XLA's own count) and the achieved fraction of the float32 matmul
            rate (a square matmul: the machine's practical peak for dense work
            on this backend), the matmul timed in turn with each row's net;
  features  KataGo's 22 + 19 inputs (ladders, pass-alive area, ...);
  evaluate  features + net + post-processing, as search calls it.
KataGo's own CPU backend runs this network at about 208 evaluations/s with 2
threads at batch 1 on 19x19 on the project's 2-core machines; that figure is
printed beside ours for batch 1.

    python bench/net.py                      # b6c96, 9x9 and 19x19, batches 1, 16, 256
    python bench/net.py --model g170-b6c96.bin.gz   # a real KataGo file
    python bench/net.py --smoke              # seconds, for CI

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform

import jax
import jax.numpy as jnp
import numpy as np
from _timing import best_time, cpu_name  # bench/_timing.py (scripts run with bench/ on the path)

import gojax
from gojax import nn as gnn
from gojax._atomic import write_atomic
from gojax.evaluate import batch_inputs, evaluate

# KataGo's own Eigen CPU backend, this network, batch 1, 19x19, 2 threads, on the
# project's 2-core machines (a figure given with the task; KataGo is not installed here).
KATAGO_CPU_B1_19X19 = 208


def matmul_call(n: int, dtype=jnp.float32):
    """``(fn, args, flops)``: an ``n x n`` matmul in ``dtype`` on the default device."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32).astype(dtype)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32).astype(dtype)
    return jax.jit(jnp.matmul), (a, b), 2.0 * n**3


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


def _fmt(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}"


def net_flops(apply, variables, spatial, global_features) -> float:
    cost = apply.lower(variables, spatial, global_features).compile().cost_analysis()
    if isinstance(cost, list | tuple):
        cost = cost[0]
    return float(cost.get("flops", float("nan"))) if cost else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="b6c96", choices=sorted(gnn.PRESETS))
    parser.add_argument("--model", help="a KataGo .bin.gz file instead of a preset")
    parser.add_argument("--size", type=int, nargs="+", default=[9, 19])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16, 256])
    parser.add_argument("--moves", type=int, default=120, help="random moves per position")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--features-max-batch",
        type=int,
        default=64,
        help="time features and evaluate only up to this batch (ladder searches in random "
        "positions cost ~25 ms per 19x19 position on a CPU core)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.smoke:
        args.preset, args.size, args.batch, args.moves, args.repeats = "tiny", [9], [4], 20, 1

    if args.model:
        from gojax.katago_model import load_model

        model = load_model(args.model)
        net, variables, version, name = model.module(), model.variables, model.version, model.name
    else:
        net = gnn.PRESETS[args.preset]()
        variables = net.init(jax.random.key(0), *gnn.example_inputs(net, 1, 19))
        version, name = 8, args.preset
    params = sum(x.size for x in jax.tree.leaves(variables["params"]))

    matmul, matmul_args, matmul_flops = matmul_call(256 if args.smoke else 2048)
    peak = matmul_flops / best_time(matmul, *matmul_args, repeats=args.repeats)
    device = jax.devices()[0]
    print(f"{name}: {params:,} parameters; {jax.device_count()} device(s), {device.device_kind}")
    print(f"CPU: {cpu_name()}")
    print(f"float32 matmul rate measured here: {peak / 1e9:,.1f} GFLOP/s")
    header = (
        f"{'board':>6} {'batch':>6} {'net eval/s':>11} {'MFLOP/eval':>11} {'GFLOP/s':>8} "
        f"{'of matmul':>10} {'features/s':>11} {'evaluate/s':>11}"
    )
    print(header)
    print("-" * len(header))
    rows = []

    # The forward pass as evaluate runs it (on a CPU, in chunks of about 6,000 board points).
    def chunked(v, s, g):
        return gnn.apply_in_chunks(net, v, s, g, chunk=gnn.default_chunk(s.shape[1]))

    apply = jax.jit(chunked)
    plain = jax.jit(functools.partial(net.apply, train=False))
    features = jax.jit(batch_inputs)
    full = jax.jit(functools.partial(evaluate, net, version=version, symmetry=0))
    for size in args.size:
        for batch in args.batch:
            # Net inputs: the features of up to --features-max-batch positions, tiled.
            base = min(batch, args.features_max_batch)
            states = random_positions(size, base, min(args.moves, size * size // 2))
            spatial, global_features = features(states)
            reps = -(-batch // base)
            spatial = jnp.tile(spatial, (reps, 1, 1, 1))[:batch]
            global_features = jnp.tile(global_features, (reps, 1))[:batch]
            t_net = best_time(apply, variables, spatial, global_features, repeats=args.repeats)
            # The matmul rate again, right after the net, so that the fraction compares the
            # two under the same load (a shared host's speed drifts over minutes). Not
            # interleaved call by call: a 2048^2 matmul between batch-1 passes evicts the
            # net's weights from the caches (batch 1 on 19x19 ran at 229/s so, 413-422/s alone).
            row_peak = matmul_flops / best_time(matmul, *matmul_args, repeats=args.repeats)
            timed = batch <= args.features_max_batch
            if timed:
                t_features = best_time(features, states, repeats=args.repeats)
                t_eval = best_time(full, variables, states, repeats=args.repeats)
            # XLA counts a loop body once: take the FLOPs of the unchunked pass.
            flops = net_flops(plain, variables, spatial, global_features)
            achieved = flops / t_net
            row = {
                "size": size,
                "batch": batch,
                "net_evals_per_s": batch / t_net,
                "mflops_per_eval": flops / batch / 1e6,
                "net_gflops": achieved / 1e9,
                "matmul_gflops": row_peak / 1e9,
                "fraction_of_matmul": achieved / row_peak,
                "features_per_s": batch / t_features if timed else None,
                "evaluate_per_s": batch / t_eval if timed else None,
            }
            rows.append(row)
            print(
                f"{size:>4}x{size:<1} {batch:>6} {row['net_evals_per_s']:>11,.0f} "
                f"{row['mflops_per_eval']:>11,.1f} {row['net_gflops']:>8,.1f} "
                f"{row['fraction_of_matmul']:>10.1%} {_fmt(row['features_per_s']):>11} "
                f"{_fmt(row['evaluate_per_s']):>11}"
            )
    single = [r for r in rows if r["batch"] == 1 and r["size"] == 19]
    if single and name.startswith(("b6c96", "g170-b6c96")):
        ratio = single[0]["net_evals_per_s"] / KATAGO_CPU_B1_19X19
        print(
            f"batch 1, 19x19: {single[0]['net_evals_per_s']:,.0f} evaluations/s = {ratio:.2f}x "
            f"KataGo's CPU backend ({KATAGO_CPU_B1_19X19}/s, 2 threads, same machine class)"
        )
    result = {
        "benchmark": "net",
        "net": name,
        "device": device.device_kind,
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "matmul_gflops": peak / 1e9,
        "katago_cpu_b1_19x19": KATAGO_CPU_B1_19X19,
        "rows": rows,
    }
    print(json.dumps(result))
    if args.json:
        write_atomic(args.json, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
