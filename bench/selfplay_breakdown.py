"""Self-play of a training config against its network bound, and where its time goes.

For a run config (``configs/*.py``) and a batch of ``B`` games, as the training loop
plays them (``train.selfplay.play_games``: the config's search, playout-cap
randomisation, the learner's encoding of every move):

* **self-play moves/s**: the searched moves of ``T`` steps (``--moves``; short, so that
  no game ends and every slot of the batch plays: a game that ended would idle in it)
  over the wall time of a call, the best of ``--repeats`` after a compiling one;
* **network bound**: the net alone (its forward pass on inputs already encoded) at the
  batch the search feeds it, ``B`` positions a call, over the evaluations a move takes
  (the root and each simulation: ``S + 1``, averaged over the full and fast searches
  the call ran): the moves/s no self-play of this net can beat;
* their **ratio**, and the time of a step shared out: the network (its evaluations at
  the net's rate), the features (the same count of encodings, KataGo's ladder scans
  included, plus the one stored per move), the host transfer of the trajectories
  (``jax.device_get``), and the rest: the search's own bookkeeping (descents,
  expansion, backups, the tree) and the step's moves. The ladder scans are named by the
  path they took (``native``: an FFI call on a CPU; ``host``: a host callback, the path
  of accelerators, ``GOJAX_NATIVE_LADDERS=host``; ``loop``: JAX's loop).

Everything is timed in one run, the components interleaved (``bench/_timing.py``), on
random-play positions of the moves the games reach. The last line printed is JSON.

    python bench/selfplay_breakdown.py configs/go9.py
    python bench/selfplay_breakdown.py configs/go19_b10c128.py --batch 16 --moves 4 \\
        --config.selfplay.num_simulations=32 --config.selfplay.fast_simulations=8
    python bench/selfplay_breakdown.py configs/go9.py --smoke   # seconds: proves the script
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from _timing import best_times, cpu_name  # bench/_timing.py (scripts run with bench/ on the path)
from net import random_positions  # bench/net.py

from gojax import _ladders as ladders  # which path the ladder scans take
from gojax.atomic import write_atomic
from train import loop
from train import model as model_lib
from train.learner import LearnerConfig, create_train_state
from train.selfplay import SelfPlayConfig, play_games

SMOKE = [
    "--config.board.size=5",
    "--config.model.preset=tiny",
    "--config.selfplay.num_simulations=4",
    "--config.selfplay.fast_simulations=2",
]


# The overrides that set a breakdown's batch and steps.
SIZED = ("--config.selfplay.num_games=", "--config.selfplay.num_steps=")


def ladder_path() -> str:
    """How this process scans ladders: ``native`` (FFI), ``host`` (callback) or ``loop``."""
    if not ladders.native_available():
        return "loop"
    return "host" if os.environ.get("GOJAX_NATIVE_LADDERS") == "host" else "native"


class Prepared(NamedTuple):
    """A run config's self-play as the training loop sets it up (a fresh net)."""

    path: str  # the config file
    overrides: list[str]  # as given to prepare, --config.GROUP.KEY=VALUE each
    config: Any  # the run config (ml_collections), overrides applied
    spec: model_lib.ModelSpec
    selfplay: SelfPlayConfig
    learner: LearnerConfig
    mesh: Any
    state: Any  # the learner's TrainState
    variables: Any  # the net's variables on the host, as self-play reads them
    evaluator_fn: Any
    encode_fn: Any


def prepare(config_path: str | Path, overrides: list[str]) -> Prepared:
    """``config_path`` with ``overrides`` applied, its net initialised and its self-play
    functions, as ``train.loop`` builds them."""
    config = loop.load_config(Path(config_path))
    loop.apply_overrides(config, list(overrides))
    spec = model_lib.spec_from_config(config.model)
    sp_config = loop.selfplay_config(config)
    lconfig = loop.learner_config(config)
    mesh = loop.make_mesh(lconfig)
    state = create_train_state(spec, lconfig, jax.random.PRNGKey(0), sp_config.size, mesh)
    evaluator_fn, encode_fn = loop.selfplay_functions(spec)
    variables = loop._host_variables(state)
    return Prepared(
        str(config_path),
        list(overrides),
        config,
        spec,
        sp_config,
        lconfig,
        mesh,
        state,
        variables,
        evaluator_fn,
        encode_fn,
    )


def breakdown(run: Prepared, repeats: int) -> dict:
    """The figures of the module docstring for the prepared self-play ``run``
    (its ``num_games`` and ``num_steps``); a flat dict."""
    config, spec, sp_config = run.config, run.spec, run.selfplay
    evaluator_fn, encode_fn, variables = run.evaluator_fn, run.encode_fn, run.variables
    batch, moves = sp_config.num_games, sp_config.steps
    module = model_lib.build(spec)

    def selfplay(seed: int):
        return play_games(evaluator_fn, encode_fn, variables, jax.random.key(seed), sp_config)

    start = time.perf_counter()
    traj, _ = selfplay(0)  # compiles, unless the same self-play ran before
    compile_s = time.perf_counter() - start
    best, positions, full_steps = np.inf, 0, 0.0
    for seed in range(1, repeats + 1):
        traj, stats = selfplay(seed)
        if stats["seconds"] < best:
            best, positions = stats["seconds"], int(stats["positions"])
            # Playout-cap randomisation draws full or fast for the whole batch each step.
            full_steps = float(np.mean(np.any(np.asarray(traj.policy_mask), axis=1)))
    start = time.perf_counter()
    jax.device_get(traj)
    transfer_s = time.perf_counter() - start

    full = sp_config.search.num_simulations + 1
    fast = full if sp_config.fast_simulations is None else sp_config.fast_simulations + 1
    evals_per_move = full_steps * full + (1.0 - full_steps) * fast

    positions_b = random_positions(sp_config.size, batch, moves)
    encode = jax.jit(lambda states: model_lib.encode(spec, states))
    # The outputs the search reads (model_lib.evaluator's): XLA drops the other heads
    # (ownership, ...) from self-play's program, so the bound must not pay for them. The
    # passes run in one jitted loop, as a search makes them (no dispatch each).
    used = ("policy_logits", "value", "score_lead", "score_stdev")
    used = used if spec.is_katago else used[:2]
    passes = 8

    @jax.jit
    def forward(variables, inputs):
        def body(_, carry):
            # Each pass depends on the last, so XLA cannot hoist it out of the loop.
            shifted = jax.tree.map(lambda x: x + 0.0 * carry[0], inputs)
            out = model_lib.forward(spec, module, variables, shifted, train=False)
            return sum(jnp.sum(out[name]) for name in used)[None]

        return jax.lax.fori_loop(0, passes, body, jnp.zeros(1, jnp.float32))

    record = jax.jit(encode_fn)
    inputs = encode(positions_b)
    seconds = best_times(
        {
            "features": (encode, (positions_b,)),
            "network": (forward, (variables, inputs)),
            "record": (record, (positions_b,)),
        },
        repeats=max(3, repeats),
    )
    step_s = best / moves
    net_s = seconds["network"] / passes  # one pass at batch B
    network_s = evals_per_move * net_s
    features_s = evals_per_move * seconds["features"] + seconds["record"]
    transfer_step_s = transfer_s / moves
    moves_per_s = positions / best
    bound = batch / network_s
    return {
        "config": Path(run.path).name,
        # Beyond the batch and the steps, which have their own columns.
        "overrides": " ".join(o for o in run.overrides if not o.startswith(SIZED)),
        "size": sp_config.size,
        "preset": config.model.preset,
        "batch": batch,
        "moves": moves,
        "simulations": f"{full - 1}/{fast - 1}",
        "evals_per_move": evals_per_move,
        "ladders": ladder_path(),
        "compile_s": compile_s,
        "selfplay_moves_per_s": moves_per_s,
        "net_evals_per_s": batch / net_s,
        "network_bound_moves_per_s": bound,
        "ratio": moves_per_s / bound,
        "share_network": network_s / step_s,
        "share_features": features_s / step_s,
        "share_transfer": transfer_step_s / step_s,
        "share_search": max(0.0, 1.0 - (network_s + features_s + transfer_step_s) / step_s),
    }


def table(rows: list[dict]) -> str:
    head = (
        "| config | B | sims (full/fast) | evals/move | self-play moves/s | net evals/s "
        "| bound moves/s | ratio | network | features (ladders) | search | transfer |"
    )
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        lines.append(
            f"| {r['config']} | {r['batch']} | {r['simulations']} | {r['evals_per_move']:.1f} "
            f"| {r['selfplay_moves_per_s']:,.1f} | {r['net_evals_per_s']:,.0f} "
            f"| {r['network_bound_moves_per_s']:,.1f} | **{r['ratio']:.0%}** "
            f"| {r['share_network']:.0%} | {r['share_features']:.0%} ({r['ladders']}) "
            f"| {r['share_search']:.0%} | {r['share_transfer']:.1%} |"
        )
    return "\n".join(lines)


def parse_with_overrides(parser: argparse.ArgumentParser) -> tuple[argparse.Namespace, list]:
    """``parser``'s arguments and the run config overrides (``--config.GROUP.KEY=V``) given
    beside them; anything else is a usage error."""
    args, overrides = parser.parse_known_args()
    bad = [o for o in overrides if not o.startswith("--config.")]
    if bad:
        parser.error(f"unknown arguments: {' '.join(bad)} (overrides are --config.GROUP.KEY=V)")
    return args, overrides


def write_summary(bench: str, rows: list[dict], path: str | None, **fields) -> None:
    """Print the JSON summary line (``bench``, ``fields``, the machine, ``rows``) and, with a
    ``path``, also write it there atomically."""
    summary = {
        "bench": bench,
        **fields,
        "machine": cpu_name() if jax.default_backend() == "cpu" else str(jax.devices()[0]),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "rows": rows,
    }
    if path:
        write_atomic(path, json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="+", help="run configs (configs/*.py)")
    parser.add_argument("--batch", type=int, default=64, help="B, self-play games (default 64)")
    parser.add_argument("--moves", type=int, default=8, help="T, moves a call (default 8)")
    parser.add_argument("--repeats", type=int, default=2, help="timed self-play calls")
    parser.add_argument("--smoke", action="store_true", help="5x5, a tiny net: seconds")
    parser.add_argument("--json", help="also write the JSON summary to this file")
    args, overrides = parse_with_overrides(parser)
    if args.smoke:
        overrides = SMOKE + overrides
        args.batch, args.moves, args.repeats = 4, 2, 1
    rows = []
    for path in args.config:
        print(f"{path}: B={args.batch}, {args.moves} moves ...", flush=True)
        steps = [f"--config.selfplay.num_games={args.batch}"]
        steps.append(f"--config.selfplay.num_steps={args.moves}")
        rows.append(breakdown(prepare(path, steps + overrides), args.repeats))
    print(table(rows))
    write_summary("selfplay_breakdown", rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
