"""One call that proves and times gojax on whatever accelerator is attached.

    bash bench/accelerator.sh --out accel-logs            # full run (GPU/TPU)
    bash bench/accelerator.sh --smoke --out /tmp/accel    # CPU, small sizes (CI)

Sections, each timed and logged (a failing section is reported and the run
goes on, so one call always yields a table):

1. devices: what JAX sees;
2. correctness: our legality against KataGo's on the first recorded games of
   ``reference/katago/rules_games.jsonl``, and the network against KataGo's
   numbers on a sample of ``positions.jsonl`` (when the reference is found;
   ``GOJAX_REFERENCE`` or ``../shared/reference``);
3. network: evaluations/s and achieved TFLOP/s of KataGo's b10c128 (g170) and
   b18c384nbt with Mish (its current kata1 architecture) at large batches in
   float32 and bfloat16, against an 8192^3 matmul in the same dtype measured
   in the same run;
4. board: random-legal-move playouts, chinese and tromp-taylor, 9x9 and
   19x19, batches up to 32768 (``bench/board.py``'s method, one draw per game),
   and pgx's playouts at the same sizes when pgx is installed;
5. search: Gumbel simulations/s (AlphaGo Zero's 20-block net, 32 simulations);
6. training: KataGo's input features alone (positions/s), self-play moves/s
   and learner samples/s of the ``configs/go19_b10c128.py`` recipe, timed
   apart (self-play: 256 games capped at 8 moves, 32/8 simulations; learner:
   the recipe's batch of 1024 drawn from those games);
7. one_game: one 19x19 game's search with the reference b6c96 net at K leaves
   a step (virtual loss; ``bench/one_game.py``'s measurement), K = 1 to 256 at
   1,024 visits, beside the net alone at batch 1 and K: the best K's visits/s
   over K = 1's (when the reference is found);
8. strength: the 9x9 recipe ``configs/go9_strong.py`` trained for
   ``--strength-minutes`` (1,024 games an iteration), continuing the run from
   ``--strength-init`` (a snapshot of it, e.g. the one in ``models/``); the
   snapshot it ends with is left in ``<out>/strength/snapshot`` to continue
   from anywhere (docs/training.md, "Continuing a run elsewhere").

Everything goes into the folder given by ``--out``: ``log.txt`` (the full
output), ``results.json`` (rewritten after every section, so a run cut short
keeps what it measured); the last line printed is one JSON object.
``--budget SECONDS`` skips the sections that would start after that many
seconds, for a lease that ends at a known time; ``--only`` runs the named
sections in the order given; ``--stack-dump SECONDS`` writes every thread's
stack into ``log.txt`` every SECONDS while a section runs (where a slow
section spends its time, when the call is cut short).

``--smoke`` also compiles at XLA's backend optimisation level 0
(``--xla_backend_optimization_level=0``, unless ``XLA_FLAGS`` already names a
level): three quarters of a smoke run is compilation, and the level-0 programs
compile in about a third of the time. Smoke figures check the pipeline, not
the speed, so slower compiled code costs nothing there.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import functools
import json
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import board as board_bench  # noqa: E402  (bench/board.py)
import net as net_bench  # noqa: E402  (bench/net.py)
import one_game as one_game_bench  # noqa: E402  (bench/one_game.py)
import selfplay as selfplay_bench  # noqa: E402  (bench/selfplay.py)
import selfplay_breakdown  # noqa: E402  (bench/selfplay_breakdown.py)
from _timing import best_time, best_times  # noqa: E402

import gojax  # noqa: E402
from gojax import _ladders as ladders  # noqa: E402
from gojax import nn as gnn  # noqa: E402
from gojax._xla_flags import fast_cpu_compiles  # noqa: E402
from gojax.atomic import write_atomic  # noqa: E402

RULES = ("chinese", "tromp-taylor")


def _init(net, size: int):
    """``net``'s variables for ``size x size`` boards, initialised in one compiled
    program (eagerly, each initialiser of each shape would compile on its own)."""
    return jax.jit(net.init)(jax.random.key(0), *gnn.example_inputs(net, 1, size))


def _reference() -> Path | None:
    root = Path(os.environ.get("GOJAX_REFERENCE", HERE.parent.parent / "shared" / "reference"))
    return root if (root / "katago").is_dir() else None


# ----------------------------------------------------------------------------


def section_devices(smoke: bool) -> dict:
    devices = jax.devices()
    for d in devices:
        print(f"  {d.platform} {d.device_kind} (id {d.id}, process {d.process_index})")
    return {"backend": jax.default_backend(), "devices": [d.device_kind for d in devices]}


def section_correctness(smoke: bool) -> dict:
    from gojax._verify import check_game, read_games
    from gojax._verify_net import verify_net_file
    from gojax.katago_model import load_model

    reference = _reference()
    if reference is None:
        print("  reference data not found: skipped (set GOJAX_REFERENCE)")
        return {"skipped": "no reference data"}
    games = 2 if smoke else 8
    problems = 0
    checked = 0
    kind = None  # smoke: games of one board size and rule set, one compiled replay
    for number, game in read_games(reference / "katago" / "rules_games.jsonl"):
        if checked == games:
            break
        if smoke and (int(game["size"]) > 9 or kind not in (None, (game["size"], game["rules"]))):
            continue
        kind = (game["size"], game["rules"])
        problems += len(check_game(game, index=number).disagreements)
        checked += 1
    print(f"  rules: {checked} games, {problems} disagreements")
    sample = 2 if smoke else 12
    lines = (reference / "katago" / "positions.jsonl").read_text().splitlines()
    chosen = [line for line in lines if json.loads(line)["size"] == 9][:sample]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sample.jsonl"
        path.write_text("\n".join(chosen) + "\n")
        model = load_model(reference / "katago" / "g170-b6c96-s175395328-d26788732.bin.gz")
        check = verify_net_file(model, path)
    worst = {k: w.difference for k, w in check.worst.items()}
    print(
        f"  network: {check.num_positions} positions, ok={check.ok}, policy max diff "
        f"{worst['policy']:.2e}, ownership {worst['whiteOwnership']:.2e}"
    )
    return {
        "rules_games": checked,
        "rules_disagreements": problems,
        "net_positions": check.num_positions,
        "net_ok": check.ok,
        "net_worst": worst,
        "ok": problems == 0 and check.ok,
    }


def section_board(smoke: bool) -> dict:
    board_bench._random_actions = board_bench.SAMPLERS["index"]
    grid = [(9, 64, 8)] if smoke else [
        (9, 1024, 64), (9, 32768, 32), (19, 1024, 32), (19, 8192, 16), (19, 32768, 16),
    ]  # fmt: skip
    try:
        import pgx  # noqa: F401  (the peer, measured in the same run when installed)

        with_pgx = True
    except ImportError:
        print("  pgx is not installed: gojax alone")
        with_pgx = False
    rows = []
    for size, batch, moves in grid:
        row = {"size": size, "batch": batch}
        engines = {rules: board_bench.gojax_engine(size, rules, batch) for rules in RULES}
        if with_pgx:
            engines["pgx"] = board_bench.pgx_engine(size, batch)
        for name, (fresh, step, _) in engines.items():
            row[name] = board_bench.steps_per_second(fresh, step, batch, moves, repeats=2)
        text = f"  {size}x{size} B={batch}: chinese {row['chinese']:,.0f} steps/s, "
        text += f"tromp-taylor {row['tromp-taylor']:,.0f}"
        if with_pgx:
            row["chinese/pgx"] = row["chinese"] / row["pgx"]
            text += f", pgx {row['pgx']:,.0f} (chinese/pgx {row['chinese/pgx']:.2f}x)"
        print(text, flush=True)
        rows.append(row)
    return {"sampler": "index (one uniform draw per game, both engines)", "rows": rows}


def _product_flops(fn, *args) -> float:
    """FLOPs of the convolutions and matrix products in ``fn(*args)``, counted on its
    jaxpr (2 per multiply-add). XLA's cost analysis counts convolutions on a CPU but
    not on a GPU, where they are cuDNN calls it cannot see into."""

    def count(jaxpr) -> float:
        total = 0.0
        for eqn in jaxpr.eqns:
            out = eqn.outvars[0].aval
            if eqn.primitive.name == "conv_general_dilated":
                rhs = eqn.invars[1].aval
                out_features = rhs.shape[eqn.params["dimension_numbers"].rhs_spec[0]]
                total += 2.0 * math.prod(out.shape) * math.prod(rhs.shape) / out_features
            elif eqn.primitive.name == "dot_general":
                (contract, _), _ = eqn.params["dimension_numbers"]
                lhs = eqn.invars[0].aval
                total += 2.0 * math.prod(out.shape) * math.prod(lhs.shape[d] for d in contract)
            for sub in sub_jaxprs(eqn.params.values()):
                total += count(sub)
        return total

    def sub_jaxprs(values):
        for value in values:
            if isinstance(value, list | tuple):
                yield from sub_jaxprs(value)
            elif hasattr(value, "eqns"):  # a Jaxpr
                yield value
            elif hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):  # a ClosedJaxpr
                yield value.jaxpr

    return count(jax.make_jaxpr(fn)(*args).jaxpr)


def _matmul_peak(dtype, n: int) -> float:
    """TFLOP/s of one n x n x n product in ``dtype`` at JAX's default precision: the
    ceiling the network's rate is compared with, measured in the same run."""
    fn, args, flops = net_bench.matmul_call(n, dtype)
    return flops / best_time(fn, *args, repeats=5) / 1e12


def _net(preset: str, activation: str, dtype) -> gnn.KataGoNet:
    """A preset's net in ``dtype``, with ``activation`` instead of its ReLU if given."""
    net = gnn.PRESETS[preset](dtype=dtype)
    if activation:
        net = net.clone(config=dataclasses.replace(net.config, activation=activation))
    return net


def section_network(smoke: bool) -> dict:
    if smoke:
        nets, size, batches, n = (("tiny", ""), ("tiny_nbt", "mish")), 9, (8,), 512
    else:
        nets, size, batches, n = (("b10c128", ""), ("b18c384nbt", "mish")), 19, (1024, 4096), 8192
    rows, peaks = [], {}
    for dtype in (jnp.float32, jnp.bfloat16):
        name = jnp.dtype(dtype).name
        peaks[name] = _matmul_peak(dtype, n)
        print(f"  matmul {n}^3 {name}: {peaks[name]:.3g} TFLOP/s", flush=True)
        for preset, activation in nets:
            label = f"{preset}-{activation}" if activation else preset
            net = _net(preset, activation, dtype)
            variables = _init(net, size)
            apply = jax.jit(functools.partial(net.apply, train=False))
            for batch in batches:
                spatial, global_ = gnn.example_inputs(net, batch, size)
                flops = _product_flops(apply, variables, spatial, global_)
                seconds = best_time(apply, variables, spatial, global_, repeats=5)
                row = {
                    "net": label,
                    "dtype": name,
                    "batch": batch,
                    "evals_per_s": batch / seconds,
                    "gflop_per_eval": flops / batch / 1e9,
                    "tflops": flops / seconds / 1e12,
                }
                row["fraction_of_matmul"] = row["tflops"] / peaks[name]
                print(
                    f"  {label} {name} {size}x{size} B={batch}: "
                    f"{row['evals_per_s']:,.0f} evals/s, {row['tflops']:.3g} TFLOP/s "
                    f"({row['fraction_of_matmul']:.0%} of the matmul)",
                    flush=True,
                )
                rows.append(row)
    return {"matmul_tflops": peaks, "rows": rows}


def section_search(smoke: bool) -> dict:
    from gojax.search import SearchConfig, agz_evaluator, search

    preset, size, batch, sims = ("agz_tiny", 5, 4, 4) if smoke else ("agz_b20c256", 19, 256, 32)
    net = gnn.PRESETS[preset]()
    variables = _init(net, size)
    config = SearchConfig(kind="gumbel", num_simulations=sims)
    states = jax.vmap(lambda _: gojax.new_game(size))(jnp.arange(batch))

    @jax.jit
    def run(variables, states, key):
        return search(agz_evaluator(net, variables), states, key, config).action

    seconds = best_time(run, variables, states, jax.random.key(1), repeats=3)
    rate = batch * sims / seconds
    print(
        f"  Gumbel {sims} simulations, {preset}, {size}x{size}, B={batch}: "
        f"{rate:,.0f} simulations/s",
        flush=True,
    )
    return {"net": preset, "batch": batch, "simulations": sims, "sims_per_s": rate}


def _features_program(batch_inputs, positions, native: bool):
    """``batch_inputs(positions)`` compiled now, its ladder scans by the native kernel or
    (``native=False``) by their JAX loop: the choice is made when the program is traced,
    so it is compiled ahead, under ``GOJAX_NATIVE_LADDERS=0`` for the loop."""
    saved = os.environ.get("GOJAX_NATIVE_LADDERS")
    if not native:
        os.environ["GOJAX_NATIVE_LADDERS"] = "0"
    try:
        return jax.jit(lambda states: batch_inputs(states)).lower(positions).compile()
    finally:
        if saved is None:
            os.environ.pop("GOJAX_NATIVE_LADDERS", None)
        else:
            os.environ["GOJAX_NATIVE_LADDERS"] = saved


def section_training(smoke: bool) -> dict:
    """Self-play and the learner of ``configs/go19_b10c128.py``, timed apart.

    Self-play: the recipe's games (playout-cap randomisation, KataGo features,
    ladders included) with fewer simulations and an 8-move cap, so that a call
    stays short; moves/s of a second call (the first compiles). Learner: the
    recipe's train step and batch size on a batch drawn from those games'
    replay, as the training loop draws it. Then the same games' breakdown against the
    network bound (``bench/selfplay_breakdown.py``: the compiled self-play reused).
    """
    from gojax.evaluate import batch_inputs
    from train import loop
    from train.learner import shard_batch
    from train.replay import ReplayBuffer
    from train.selfplay import play_games

    if smoke:
        overrides = [
            "--config.board.size=5", "--config.model.preset=tiny",
            "--config.selfplay.num_simulations=2", "--config.selfplay.fast_simulations=0",
            "--config.board.max_moves=6", "--config.learner.batch_size=8",
        ]  # fmt: skip
        games, moves = 4, 6
    else:
        # Few simulations: the figure is moves/s of the pipeline, not of a 600-playout search.
        overrides = [
            "--config.board.max_moves=8",
            "--config.selfplay.num_simulations=32", "--config.selfplay.fast_simulations=8",
        ]  # fmt: skip
        games, moves = 256, 8
    # The breakdown below plays the same games (num_steps = the move cap): one program.
    path = HERE.parent / "configs" / "go19_b10c128.py"
    run = selfplay_breakdown.prepare(
        path,
        [f"--config.selfplay.num_games={games}", f"--config.selfplay.num_steps={moves}"]
        + overrides,
    )
    config, spec, sp_config, lconfig = run.config, run.spec, run.selfplay, run.learner
    mesh, state, variables = run.mesh, run.state, run.variables
    evaluator_fn, encode_fn = run.evaluator_fn, run.encode_fn

    def selfplay(seed: int):
        return play_games(evaluator_fn, encode_fn, variables, jax.random.key(seed), sp_config)

    # KataGo's input features alone (ladder searches included) on random-play positions:
    # what every evaluation of the recipe's self-play computes before its net. Timed twice:
    # as self-play computes them (the ladders by the native scan: an FFI call on a CPU, a
    # host callback on an accelerator) and with the ladders' JAX loop on the device.
    size, num_positions = sp_config.size, 4 if smoke else 256
    positions = net_bench.random_positions(size, num_positions, size * size // 3)
    features_native = _features_program(batch_inputs, positions, native=True)
    features_loop = _features_program(batch_inputs, positions, native=False)
    seconds = best_times(
        {"native": (features_native, (positions,)), "loop": (features_loop, (positions,))},
        repeats=1 if smoke else 3,
    )
    planes_agree = all(
        bool(jnp.array_equal(a, b))
        for a, b in zip(
            jax.tree.leaves(features_native(positions)),
            jax.tree.leaves(features_loop(positions)),
            strict=True,
        )
    )
    features_per_s = num_positions / seconds["native"]
    features_loop_per_s = num_positions / seconds["loop"]
    print(
        f"  KataGo features, {size}x{size}, B={num_positions}: {features_per_s:,.0f} positions/s "
        f"(native ladder scan), {features_loop_per_s:,.0f} with the ladders' JAX loop "
        f"({features_per_s / features_loop_per_s:.1f}x); the same planes: {planes_agree}"
    )

    _, first = selfplay(0)  # compiles
    print(f"  self-play: first call (compiling) {first['seconds']:.1f} s", flush=True)
    traj, stats = selfplay(1)
    replay = ReplayBuffer(max(int(stats["positions"]), 1))
    replay.add(traj)
    sample = replay.sample(jax.random.key(2), lconfig.batch_size, augment=config.replay.augment)
    batch = shard_batch(loop._to_learner_batch(sample, spec), mesh)
    step_fn = loop._train_step(spec, lconfig, mesh)
    box = [state]  # the step donates its state: thread it through the calls

    def step():
        box[0], metrics = step_fn(box[0], batch)
        return metrics

    samples_per_s = selfplay_bench.learner_rate(step, lconfig.batch_size, 1 if smoke else 3)
    # Self-play against its network bound, and where a step's time goes (the same games).
    split = selfplay_breakdown.breakdown(run, repeats=1 if smoke else 2)
    print("  " + selfplay_breakdown.table([split]).replace("\n", "\n  "), flush=True)
    simulations = f"{sp_config.search.num_simulations}/{sp_config.fast_simulations or 0} sims"
    result = {
        "config": f"go19_b10c128 ({'smoke: 5x5 tiny' if smoke else 'B=256, 8 moves'}, "
        f"{simulations})",
        "features_batch": num_positions,
        "features_per_s": float(features_per_s),
        "features_loop_per_s": float(features_loop_per_s),
        "ladders_native": ladders.native_available(),
        "ladder_planes_agree": planes_agree,
        "selfplay_games": sp_config.num_games,
        "selfplay_positions": int(stats["positions"]),
        "selfplay_compile_s": float(first["seconds"]),
        "selfplay_moves_per_s": float(stats["moves_per_second"]),
        "learner_batch": lconfig.batch_size,
        "learner_samples_per_s": float(samples_per_s),
        **{f"breakdown_{key}": value for key, value in split.items()},
        "ok": planes_agree,
    }
    print(
        f"  self-play {result['selfplay_moves_per_s']:,.0f} moves/s "
        f"({result['selfplay_positions']} positions), "
        f"learner {result['learner_samples_per_s']:,.0f} samples/s "
        f"(batch {lconfig.batch_size})",
        flush=True,
    )
    return result


def section_one_game(smoke: bool) -> dict:
    """One game's search at K leaves a step against K = 1 (``bench/one_game.py``): on an
    accelerator a batch of one leaves nearly the whole device idle, so K is the lever
    for the GTP and analysis engines there."""
    from gojax.katago_model import load_model

    if not one_game_bench.MODEL.exists():  # the same reference folder as _reference()'s
        print("  reference net not found: skipped (set GOJAX_REFERENCE)")
        return {"skipped": "no reference net"}
    size, visits, leaf_batches = (9, 8, [1, 4]) if smoke else (19, 1024, [1, 16, 64, 256])
    settings = argparse.Namespace(
        move=40,
        visits={size: visits},
        leaf_batches=leaf_batches,
        kind="katago",
        virtual_loss=1,
        katago=None,
        repeats=1 if smoke else 2,
    )
    rows, _ = one_game_bench.measure(load_model(one_game_bench.MODEL), size, settings)
    print("  " + one_game_bench.table(rows).replace("\n", "\n  "))
    best = max(rows, key=lambda row: row["search_visits_per_s"])
    print(
        f"  {size}x{size}, {visits} visits: best K = {best['leaf_batch']}, "
        f"{best['speedup_over_first']:.1f}x the visits/s of K = 1",
        flush=True,
    )
    return {
        "size": size,
        "visits": visits,
        "rows": rows,
        "best_leaf_batch": best["leaf_batch"],
        "best_over_k1": best["speedup_over_first"],
    }


# The strength recipe's section: minutes of training and the state to continue from
# (--strength-minutes, --strength-init); set by main().
STRENGTH = {"minutes": 5.0, "init": "", "games": 1024}


def section_strength(smoke: bool) -> dict:
    """``configs/go9_strong.py`` trained for ``--strength-minutes`` at a batch of games that
    fills the device, from ``--strength-init`` (a snapshot of the run: its state and
    counters) or from scratch; the snapshot it ends with is copied under ``--out``
    (``strength/snapshot``), to continue the run from on any machine.

    Reports self-play moves/s, learner samples/s and the share of the wall time in
    self-play, in the learner and elsewhere (compiling, checkpoints, evaluation).
    """
    import json as json_lib
    import shutil

    from train import loop
    from train.continuation import checkpoint_counters, snapshot

    out = Path(STRENGTH["out"]) / "strength"
    shutil.rmtree(out, ignore_errors=True)  # this section's own scratch: a fresh run each call
    workdir = out / "run"
    config = loop.load_config(HERE.parent / "configs" / "go9_strong.py")
    games = 8 if smoke else int(STRENGTH["games"])
    # As many learner steps per game as the recipe's.
    updates = max(1, config.train.updates_per_iteration * games // config.selfplay.num_games)
    overrides = [
        f"--config.selfplay.num_games={games}",
        # One slot per game: the games are the batch that fills the device (the recipe's
        # 32 slots suit 2 CPU cores).
        "--config.selfplay.num_slots=0",
        f"--config.train.updates_per_iteration={updates}",
        f"--config.train.max_minutes={STRENGTH['minutes']}",
        "--config.train.progress=false",
        "--config.train.snapshot_every=0",
        "--config.eval.num_games=0",
    ]
    if smoke:
        overrides += [
            "--config.board.size=5", "--config.board.max_moves=20",
            "--config.model.preset=tiny",
            "--config.selfplay.num_simulations=4", "--config.replay.min_size=32",
            "--config.learner.batch_size=16", "--config.train.updates_per_iteration=2",
            "--config.train.max_minutes=0.2",  # one iteration after compiling
        ]  # fmt: skip
    if STRENGTH["init"]:
        overrides.append(f"--config.train.init_from={STRENGTH['init']}")
    loop.apply_overrides(config, overrides)
    began = time.perf_counter()
    summary = loop.train(config, workdir)
    wall = time.perf_counter() - began
    step = snapshot(workdir, out / "snapshot")
    metrics = workdir / "metrics.jsonl"
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    records = [json_lib.loads(line) for line in lines]
    selfplay_s = sum(r.get("selfplay.seconds", 0.0) for r in records)
    moves = sum(r.get("selfplay.positions", 0.0) for r in records)
    learner_s = sum(r.get("learner.seconds", 0.0) for r in records)
    samples = sum(r.get("learner.steps", 0.0) for r in records) * config.learner.batch_size
    counters = checkpoint_counters(out / "snapshot", step)
    result = {
        "config": f"go9_strong, {games} games an iteration, {STRENGTH['minutes']:g} minutes",
        "from": STRENGTH["init"] or "scratch",
        "step": int(summary["step"]),
        "games": int(counters["games"]),
        "selfplay_moves_per_s": moves / max(selfplay_s, 1e-9),
        "learner_samples_per_s": samples / max(learner_s, 1e-9),
        "share_selfplay": selfplay_s / wall,
        "share_learner": learner_s / wall,
        "share_other": max(0.0, 1 - (selfplay_s + learner_s) / wall),
        "snapshot": str(out / "snapshot" / "checkpoints" / str(step)),
        "ok": summary["step"] > 0,
    }
    print(
        f"  go9_strong: step {result['step']}, {result['games']} games in all; self-play "
        f"{result['selfplay_moves_per_s']:,.0f} moves/s, learner "
        f"{result['learner_samples_per_s']:,.0f} samples/s; time: self-play "
        f"{result['share_selfplay']:.0%}, learner {result['share_learner']:.0%}, other "
        f"{result['share_other']:.0%}; snapshot {result['snapshot']}",
        flush=True,
    )
    return result


SECTIONS = [
    ("devices", section_devices),
    ("correctness", section_correctness),
    ("network", section_network),
    ("board", section_board),
    ("search", section_search),
    ("training", section_training),
    ("one_game", section_one_game),
    ("strength", section_strength),
]


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self):
        for s in self.streams:
            s.flush()


def _write_results(out: Path, smoke: bool, results: dict) -> str:
    """Write ``results.json`` (atomically) and return its line. A figure a section left
    as a JAX or numpy scalar is written as a number, anything else unknown as text: a
    stray type must not cost the run its results."""

    def plain(value):
        try:
            return float(value)
        except (TypeError, ValueError):
            return str(value)

    line = json.dumps({"benchmark": "accelerator", "smoke": smoke, **results}, default=plain)
    write_atomic(out / "results.json", line + "\n")
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, for a CPU")
    parser.add_argument("--out", default="accelerator-logs", help="folder for logs and JSON")
    parser.add_argument("--only", nargs="*", help="run only these sections, in this order")
    parser.add_argument(
        "--budget",
        type=float,
        help="seconds: sections that would start after this are skipped (a lease's end)",
    )
    parser.add_argument(
        "--stack-dump",
        type=float,
        metavar="SECONDS",
        help="write every thread's stack to log.txt each SECONDS a section runs (for a hang)",
    )
    parser.add_argument(
        "--strength-minutes",
        type=float,
        default=STRENGTH["minutes"],
        help="minutes of go9_strong training in the strength section (default 5)",
    )
    parser.add_argument(
        "--strength-init",
        default="",
        help="a snapshot of the go9_strong run to continue from (default: from scratch)",
    )
    parser.add_argument(
        "--strength-games",
        type=int,
        default=STRENGTH["games"],
        help="self-play games an iteration in the strength section (default 1024)",
    )
    args = parser.parse_args()
    STRENGTH.update(
        minutes=args.strength_minutes,
        init=args.strength_init,
        games=args.strength_games,
        out=args.out,
    )
    # Before the first computation starts XLA's backend, which reads the flags once.
    fast_compiles = args.smoke and fast_cpu_compiles(os.environ)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "log.txt", "w", encoding="utf-8")  # noqa: SIM115 (kept open for the run)
    sys.stdout = _Tee(sys.__stdout__, log)
    sys.stderr = _Tee(sys.__stderr__, log)

    print(
        f"gojax accelerator check: {platform.node()}, jax {jax.__version__}, "
        f"{'smoke' if args.smoke else 'full'} run, {time.strftime('%Y-%m-%d %H:%M:%S')}"
    )
    if fast_compiles:
        print("  smoke: XLA backend optimisation level 0 (fast compiles; figures not speeds)")
    began = time.perf_counter()
    results, table = {}, []
    sections = dict(SECTIONS)
    unknown = sorted(set(args.only or ()) - set(sections))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(sections)}")
    for name in args.only or sections:
        fn = sections[name]
        if args.budget is not None and time.perf_counter() - began > args.budget:
            results[name] = {"skipped": f"past the {args.budget:.0f} s budget"}
            table.append((name, "SKIPPED", 0.0))
            continue
        print(f"[{name}]", flush=True)
        start = time.perf_counter()
        if args.stack_dump:
            faulthandler.dump_traceback_later(args.stack_dump, repeat=True, file=log)
        try:
            results[name] = fn(args.smoke)
            status = "ok" if results[name].get("ok", True) else "FAILED CHECK"
        except Exception as err:  # a broken section must not cost the others
            traceback.print_exc()
            results[name] = {"error": f"{type(err).__name__}: {err}"}
            status = "ERROR"
        faulthandler.cancel_dump_traceback_later()
        seconds = time.perf_counter() - start
        results[name]["seconds"] = seconds
        table.append((name, status, seconds))
        # After every section, so a run cut short still leaves what it measured.
        _write_results(out, args.smoke, results)

    print()
    print(f"{'section':<13}{'status':<14}{'seconds':>8}")
    for name, status, seconds in table:
        print(f"{name:<13}{status:<14}{seconds:>8.1f}")
    print(_write_results(out, args.smoke, results))
    failed = any(status not in ("ok", "SKIPPED") for _, status, _ in table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
