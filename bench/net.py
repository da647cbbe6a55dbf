"""Network evaluation throughput against the machine's own float32 matmul rate.

For a KataGo-family net (b6c96 by default) on positions from random play, per
board size and batch:
  net       evaluations/s of the forward pass alone, as inference runs it (on a
            CPU, 3x3 convolutions by the native Winograd kernel, gojax.winograd),
            from its best call; "median" from its median call (each path is
            timed for at least --min-seconds: a batch-1 call takes ~3 ms, and
            the best of a few such calls on a shared host swung by 1.7x);
  xla conv  the same with XLA's direct convolutions, timed in turn with it;
  FLOPs     per evaluation, XLA's count of the direct-convolution network (the
            network's nominal cost; Winograd does fewer multiply-adds, 3.6x fewer
            in the 3x3 convolutions on 19x19, so its "effective" fraction of the
            matmul rate can pass 100%);
  fraction  achieved over the float32 matmul rate (a square matmul: the
            machine's practical peak for dense work), the matmul timed right
            after each row's nets;
  features  KataGo's 22 + 19 inputs (ladders, pass-alive area, ...);
  evaluate  features + net + post-processing, as search calls it.
KataGo's own CPU backend (Eigen, itself Winograd) runs this network at about 208
evaluations/s with 2 threads at batch 1 on 19x19 on the project's 2-core
machines (the reference figure for this machine class); ``--katago BIN`` measures it here
instead, in the same run, with KataGo's ``benchmark`` command (a KataGo built
with its Eigen backend; not shipped with gojax).

    python bench/net.py                      # b6c96, 9x9 and 19x19, batches 1, 16, 256
    python bench/net.py --model g170-b6c96.bin.gz   # a real KataGo file
    python bench/net.py --model g170-b6c96.bin.gz --katago ./katago
    python bench/net.py --smoke              # seconds, for CI

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import subprocess
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from _timing import (
    best_time,
    call_times,
    cpu_name,
)  # bench/_timing.py (scripts run with bench/ on the path)

import gojax
from gojax import nn as gnn
from gojax import winograd
from gojax._xla_flags import fast_cpu_compiles
from gojax.atomic import write_atomic
from gojax.evaluate import batch_inputs, evaluate

# KataGo's own Eigen CPU backend, this network, batch 1, 19x19, 2 threads, on the
# project's 2-core machines (the reference figure for that machine class; --katago measures it).
KATAGO_CPU_B1_19X19 = 208


def katago_rate(binary: str, model: str, threads: int = 2, visits: int = 300) -> float:
    """KataGo's neural-net evaluations/s on this machine: its ``benchmark`` command on
    ``model`` (19x19 positions from its built-in game) with ``threads`` search threads.

    With the Eigen backend each search thread evaluates its own position (batch 1)
    on one core, so 2 threads is KataGo's batch-1 rate on two cores. Raises
    RuntimeError with KataGo's output when the run fails or prints no rate.
    """
    with tempfile.TemporaryDirectory() as tmp:
        config = f"{tmp}/benchmark.cfg"
        with open(config, "w", encoding="utf-8") as handle:
            handle.write(
                f"logDir = {tmp}/logs\nlogToStderr = false\nnumSearchThreads = {threads}\n"
            )
        command = [binary, "benchmark", "-model", model, "-config", config]
        command += ["-t", str(threads), "-v", str(visits)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as error:
            raise RuntimeError(f"could not run {binary}: {error}") from error
    text = done.stdout + done.stderr
    rates = re.findall(
        rf"numSearchThreads = +{threads}: 10 / 10 positions.*?nnEvals/s = ([0-9.]+)", text
    )
    if done.returncode != 0 or not rates:
        raise RuntimeError(f"{binary} benchmark printed no nnEvals/s:\n{text[-2000:]}")
    return float(rates[-1])


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
        "--min-seconds",
        type=float,
        default=1.0,
        help="time each forward pass for at least this long (and --repeats calls)",
    )
    parser.add_argument(
        "--features-max-batch",
        type=int,
        default=64,
        help="time features and evaluate only up to this batch (ladder searches in random "
        "positions cost ~25 ms per 19x19 position on a CPU core)",
    )
    parser.add_argument(
        "--katago",
        metavar="BIN",
        help="a KataGo executable (Eigen backend): measure its rate on --model here",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, compiled at XLA level 0 (for CI)"
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.smoke:
        args.preset, args.size, args.batch, args.moves, args.repeats = "tiny", [9], [4], 20, 1
        fast_cpu_compiles(os.environ)  # before the first computation starts XLA
    if args.katago and not args.model:
        parser.error("--katago needs --model (KataGo reads the network from the file)")

    if args.model:
        from gojax.katago_model import load_model

        model = load_model(args.model)
        net, variables, version, name = (
            model.module(),
            model.variables,
            model.output_spec,
            model.name,
        )
    else:
        net = gnn.PRESETS[args.preset]()
        # One compiled program: eagerly, each initialiser of each shape compiles on its own.
        variables = jax.jit(net.init)(jax.random.key(0), *gnn.example_inputs(net, 1, 19))
        variables = gnn.with_winograd_kernels(net, variables)
        version, name = 8, args.preset
    params = sum(x.size for x in jax.tree.leaves(variables["params"]))

    matmul, matmul_args, matmul_flops = matmul_call(256 if args.smoke else 2048)
    peak = matmul_flops / best_time(matmul, *matmul_args, repeats=args.repeats)
    device = jax.devices()[0]
    print(f"{name}: {params:,} parameters; {jax.device_count()} device(s), {device.device_kind}")
    print(f"CPU: {cpu_name()}")
    print(f"float32 matmul rate measured here: {peak / 1e9:,.1f} GFLOP/s")
    on_cpu = device.platform == "cpu"
    if on_cpu:
        print(f"Winograd convolutions: {'on' if winograd.available() else 'off'}")
    header = (
        f"{'board':>6} {'batch':>6} {'net eval/s':>11} {'median':>8} {'xla conv/s':>11} "
        f"{'MFLOP/eval':>11} "
        f"{'GFLOP/s':>8} {'of matmul':>10} {'xla conv':>9} {'features/s':>11} {'evaluate/s':>11}"
    )
    print(header)
    print("-" * len(header))
    rows = []

    # The forward pass as evaluate runs it (on a CPU, in chunks of about 6,000 board points).
    def chunked(v, s, g):
        return gnn.apply_in_chunks(net, v, s, g, chunk=gnn.default_chunk(s.shape[1]))

    apply = jax.jit(chunked)
    # The same passes traced under winograd.disabled() (below): XLA's convolutions throughout.
    apply_xla = jax.jit(lambda v, s, g: chunked(v, s, g))
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
            inputs = (variables, spatial, global_features)
            with winograd.disabled():  # trace (and compile) the XLA-convolution pass here
                jax.block_until_ready(apply_xla(*inputs))
            runs = call_times(
                {"net": (apply, inputs), "xla": (apply_xla, inputs)},
                args.repeats,
                min_s=0.0 if args.smoke else args.min_seconds,
            )
            times = {name: min(t) for name, t in runs.items()}
            # The matmul rate again, right after the nets, so that the fraction compares
            # them under the same load (a shared host's speed drifts over minutes). Not
            # interleaved call by call: a 2048^2 matmul between batch-1 passes evicts the
            # net's weights from the caches (batch 1 on 19x19 ran at 229/s so, 413-422/s alone).
            row_peak = matmul_flops / best_time(matmul, *matmul_args, repeats=args.repeats)
            timed = batch <= args.features_max_batch
            if timed:
                t_features = best_time(features, states, repeats=args.repeats)
                t_eval = best_time(full, variables, states, repeats=args.repeats)
            # XLA's count of the direct-convolution net; it counts a loop body once: take
            # the unchunked pass.
            with winograd.disabled():
                flops = net_flops(plain, variables, spatial, global_features)
            row = {
                "size": size,
                "batch": batch,
                "net_evals_per_s": batch / times["net"],
                "net_evals_per_s_median": batch / float(np.median(runs["net"])),
                "xla_conv_evals_per_s": batch / times["xla"],
                "mflops_per_eval": flops / batch / 1e6,
                "net_gflops": flops / times["net"] / 1e9,
                "matmul_gflops": row_peak / 1e9,
                "fraction_of_matmul": flops / times["net"] / row_peak,
                "xla_conv_fraction_of_matmul": flops / times["xla"] / row_peak,
                "features_per_s": batch / t_features if timed else None,
                "evaluate_per_s": batch / t_eval if timed else None,
            }
            rows.append(row)
            print(
                f"{size:>4}x{size:<1} {batch:>6} {row['net_evals_per_s']:>11,.0f} "
                f"{row['net_evals_per_s_median']:>8,.0f} "
                f"{row['xla_conv_evals_per_s']:>11,.0f} {row['mflops_per_eval']:>11,.1f} "
                f"{row['net_gflops']:>8,.1f} {row['fraction_of_matmul']:>10.1%} "
                f"{row['xla_conv_fraction_of_matmul']:>9.1%} {_fmt(row['features_per_s']):>11} "
                f"{_fmt(row['evaluate_per_s']):>11}"
            )
    if on_cpu:
        print(
            "(MFLOP/eval and the fractions count the direct convolutions; Winograd does fewer "
            "multiply-adds, so 'of matmul' can pass 100%)"
        )
    katago, katago_source = KATAGO_CPU_B1_19X19, "the reference figure for this machine class"
    if args.katago:
        try:
            katago = katago_rate(args.katago, args.model)
            katago_source = "measured here now, 2 threads"
        except RuntimeError as error:
            print(f"KataGo not measured: {error}")
    single = [r for r in rows if r["batch"] == 1 and r["size"] == 19]
    if single and name.startswith(("b6c96", "g170-b6c96")):
        best, median = single[0]["net_evals_per_s"], single[0]["net_evals_per_s_median"]
        print(
            f"batch 1, 19x19: {best:,.0f} evaluations/s = {best / katago:.2f}x KataGo's CPU "
            f"backend ({katago:,.0f}/s, {katago_source}); median call {median:,.0f}/s = "
            f"{median / katago:.2f}x"
        )
    result = {
        "benchmark": "net",
        "net": name,
        "device": device.device_kind,
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "winograd": on_cpu and winograd.available(),
        "matmul_gflops": peak / 1e9,
        "katago_cpu_b1_19x19": katago,
        "katago_source": katago_source,
        "rows": rows,
    }
    print(json.dumps(result))
    if args.json:
        write_atomic(args.json, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
