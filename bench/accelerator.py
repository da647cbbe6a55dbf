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
3. board: random-legal-move playouts, chinese and tromp-taylor, 9x9 and
   19x19, batches up to 32768 (``bench/board.py``'s method, one draw per game);
4. network: evaluations/s and achieved TFLOP/s of a KataGo b10c128 net at a
   large batch in float32 and bfloat16;
5. search: Gumbel simulations/s (AlphaGo Zero's 20-block net, 32 simulations);
6. training: self-play moves/s and learner samples/s of the
   ``configs/go19_b10c128.py`` recipe, shortened to a few iterations.

Everything goes into the folder given by ``--out``: ``log.txt`` (the full
output), ``results.json``; the last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
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
from _timing import best_time  # noqa: E402

import gojax  # noqa: E402
from gojax import nn as gnn  # noqa: E402


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
    games = 3 if smoke else 20
    problems = 0
    checked = 0
    for number, game in read_games(reference / "katago" / "rules_games.jsonl"):
        if checked == games:
            break
        if smoke and int(game["size"]) > 9:
            continue
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
    grid = [(9, 64, 8), (19, 16, 8)] if smoke else [
        (9, 1024, 64), (9, 8192, 32), (9, 32768, 16),
        (19, 256, 32), (19, 4096, 16), (19, 32768, 8),
    ]  # fmt: skip
    rows = []
    for size, batch, moves in grid:
        row = {"size": size, "batch": batch}
        for rules in ("chinese", "tromp-taylor"):
            fresh, step, _ = board_bench.gojax_engine(size, rules, batch)
            row[rules] = board_bench.steps_per_second(fresh, step, batch, moves, repeats=2)
        print(
            f"  {size}x{size} B={batch}: chinese {row['chinese']:,.0f} steps/s, "
            f"tromp-taylor {row['tromp-taylor']:,.0f}",
            flush=True,
        )
        rows.append(row)
    return {"rows": rows}


def section_network(smoke: bool) -> dict:
    preset, size, batch = ("tiny", 9, 8) if smoke else ("b10c128", 19, 1024)
    rows = []
    for dtype in (jnp.float32, jnp.bfloat16):
        net = gnn.PRESETS[preset](dtype=dtype)
        spatial, global_ = gnn.example_inputs(net, batch, size)
        variables = net.init(jax.random.key(0), spatial[:1], global_[:1])
        apply = jax.jit(functools.partial(net.apply, train=False))
        cost = apply.lower(variables, spatial, global_).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list | tuple) else cost
        flops = float(cost.get("flops", float("nan"))) if cost else float("nan")
        seconds = best_time(apply, variables, spatial, global_, repeats=3)
        row = {
            "net": preset,
            "dtype": jnp.dtype(dtype).name,
            "batch": batch,
            "evals_per_s": batch / seconds,
            "tflops": flops / seconds / 1e12,
        }
        print(
            f"  {preset} {row['dtype']} B={batch}: {row['evals_per_s']:,.0f} evals/s, "
            f"{row['tflops']:.2f} TFLOP/s",
            flush=True,
        )
        rows.append(row)
    return {"rows": rows}


def section_search(smoke: bool) -> dict:
    from gojax.search import SearchConfig, agz_evaluator, search

    preset, size, batch, sims = ("agz_tiny", 5, 4, 4) if smoke else ("agz_b20c256", 19, 256, 32)
    net = gnn.PRESETS[preset]()
    variables = net.init(jax.random.key(0), *gnn.example_inputs(net, 1, size))
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


def section_training(smoke: bool) -> dict:
    from train.loop import apply_overrides, load_config, train

    config = load_config(HERE.parent / "configs" / "go19_b10c128.py")
    if smoke:
        overrides = [
            "--config.board.size=5", "--config.model.preset=tiny",
            "--config.selfplay.num_games=4", "--config.selfplay.num_simulations=2",
            "--config.selfplay.fast_simulations=0", "--config.board.max_moves=24",
            "--config.learner.batch_size=8", "--config.replay.min_size=1",
            "--config.train.total_steps=4", "--config.train.updates_per_iteration=2",
        ]  # fmt: skip
    else:
        overrides = [
            # Few simulations: the figure is moves/s of the pipeline, not of a 600-playout search.
            "--config.selfplay.num_games=128", "--config.board.max_moves=16",
            "--config.selfplay.num_simulations=32", "--config.selfplay.fast_simulations=8",
            "--config.replay.min_size=1024", "--config.learner.batch_size=256",
            "--config.train.total_steps=32", "--config.train.updates_per_iteration=16",
        ]  # fmt: skip
    overrides += [
        "--config.train.progress=false", "--config.eval.num_games=0",
        "--config.train.sgf_games=0", "--config.train.plot_every=0",
    ]  # fmt: skip
    apply_overrides(config, overrides)
    with tempfile.TemporaryDirectory() as workdir:
        train(config, workdir)
        records = [json.loads(line) for line in (Path(workdir) / "metrics.jsonl").open()]
    moves = [r["selfplay.moves_per_second"] for r in records if "selfplay.moves_per_second" in r]
    samples = [
        r["learner.samples_per_second"] for r in records if "learner.samples_per_second" in r
    ]
    # The first iteration includes compilation: report the best later one when there is one.
    result = {
        "config": "go19_b10c128" + (" (smoke: 5x5 tiny)" if smoke else " (B=128, 32/8 sims)"),
        "selfplay_moves_per_s": max(moves[1:] or moves or [float("nan")]),
        "learner_samples_per_s": max(samples[1:] or samples or [float("nan")]),
    }
    print(
        f"  self-play {result['selfplay_moves_per_s']:,.0f} moves/s, learner "
        f"{result['learner_samples_per_s']:,.0f} samples/s",
        flush=True,
    )
    return result


SECTIONS = [
    ("devices", section_devices),
    ("correctness", section_correctness),
    ("board", section_board),
    ("network", section_network),
    ("search", section_search),
    ("training", section_training),
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, for a CPU")
    parser.add_argument("--out", default="accelerator-logs", help="folder for logs and JSON")
    parser.add_argument("--only", nargs="*", help="run only these sections")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "log.txt", "w", encoding="utf-8")  # noqa: SIM115 (kept open for the run)
    sys.stdout = _Tee(sys.__stdout__, log)
    sys.stderr = _Tee(sys.__stderr__, log)

    print(
        f"gojax accelerator check: {platform.node()}, jax {jax.__version__}, "
        f"{'smoke' if args.smoke else 'full'} run, {time.strftime('%Y-%m-%d %H:%M:%S')}"
    )
    results, table = {}, []
    for name, fn in SECTIONS:
        if args.only and name not in args.only:
            continue
        print(f"[{name}]", flush=True)
        start = time.perf_counter()
        try:
            results[name] = fn(args.smoke)
            status = "ok" if results[name].get("ok", True) else "FAILED CHECK"
        except Exception as err:  # a broken section must not cost the others
            traceback.print_exc()
            results[name] = {"error": f"{type(err).__name__}: {err}"}
            status = "ERROR"
        seconds = time.perf_counter() - start
        results[name]["seconds"] = seconds
        table.append((name, status, seconds))

    print()
    print(f"{'section':<13}{'status':<14}{'seconds':>8}")
    for name, status, seconds in table:
        print(f"{name:<13}{status:<14}{seconds:>8.1f}")
    line = json.dumps({"benchmark": "accelerator", "smoke": args.smoke, **results})
    (out / "results.json").write_text(line + "\n", encoding="utf-8")
    print(line)
    failed = any(status != "ok" for _, status, _ in table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
