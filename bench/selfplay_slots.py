"""Whole games of self-play: how much of the batch plays, one slot per game or refilled.

Self-play searches ``S`` positions a step (``selfplay.num_slots``). With one slot per
game (``S = G``, the default) a slot whose game ended is searched for nothing until the
longest game of the call ends; with ``S < G`` a slot that frees takes the next game not
yet begun, so the batch stays full until the last games. For a run config (the network
of a checkpoint with ``--checkpoint``, so that the games last as that net's do; a fresh
net otherwise) this plays ``G`` whole games at each ``S`` of ``--slots`` and prints, per
``S``:

* **moves/s**: the moves searched over the wall time of a call (after a compiling one),
  the best of ``--repeats``, and the speed-up over ``S = G``;
* **fill**: the share of the slots' searches that went to a running game, the games'
  steps over ``S`` times the steps of the call. The steps of the call follow from the
  games' lengths: slot ``s`` starts game ``s``, and at each step the slots whose game
  ended take the next games in slot order, as ``train.selfplay`` assigns them;
* the mean and longest game.

The last line printed is JSON.

    python bench/selfplay_slots.py configs/go9_strong.py --checkpoint models/go9_strong_state \
        --games 64 --slots 64,32,16
    python bench/selfplay_slots.py --smoke   # seconds: proves the script
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import jax
import numpy as np
from selfplay_breakdown import (  # bench/selfplay_breakdown.py
    SMOKE,
    parse_with_overrides,
    prepare,
    write_summary,
)

from train.checkpoint import restore_variables
from train.selfplay import play_games


def call_steps(steps_per_game: np.ndarray, slots: int) -> int:
    """The steps a call of ``G`` games lasting ``steps_per_game [G]`` takes on ``slots``
    slots: slot ``s`` starts game ``s``; after each step the slots whose game ended take
    the next games, in slot order (``train.selfplay._play``)."""
    left = list(steps_per_game[:slots])
    upcoming = iter(steps_per_game[slots:])
    step = 0
    while any(n > 0 for n in left):
        step += 1
        for s, n in enumerate(left):
            if n > 0:
                left[s] = n - 1
                if left[s] == 0:
                    left[s] = next(upcoming, 0)
    return step


def best_call(run, sp_config, variables, repeats: int) -> dict:
    """Best of ``repeats`` timed self-play calls (after a compiling one): its figures."""
    play = lambda seed: play_games(  # noqa: E731
        run.evaluator_fn, run.encode_fn, variables, jax.random.key(seed), sp_config
    )
    play(0)
    best = None
    for seed in range(1, repeats + 1):
        traj, stats = play(seed)
        if best is None or stats["moves_per_second"] > best["moves_per_second"]:
            # A game's steps: its moves, and the step in which it resigned.
            steps = np.asarray(traj.length) + (np.asarray(traj.resigned) != 0)
            assert steps.sum() == stats["positions"], "every searched position is a game's"
            best = dict(stats, longest=int(steps.max()), steps=call_steps(steps, sp_config.slots))
    return best


def measure(run, variables, games: int, slots: list[int], repeats: int) -> list:
    rows = []
    for s in slots:
        config = dataclasses.replace(run.selfplay, num_games=games, num_slots=s, num_steps=None)
        print(f"S={s}: {games} whole games ...", flush=True)
        w = best_call(run, config, variables, repeats)
        rows.append(
            {
                "games": games,
                "slots": s,
                "positions": int(w["positions"]),
                "mean_game_length": w["mean_game_length"],
                "longest_game": w["longest"],
                "resignations": int(w["resignations"]),
                "call_steps": w["steps"],
                "fill": w["positions"] / (s * w["steps"]),
                "moves_per_s": w["moves_per_second"],
            }
        )
    base = next((r for r in rows if r["slots"] == games), rows[0])
    for r in rows:
        r["speedup"] = r["moves_per_s"] / base["moves_per_s"]
    return rows


def table(rows: list[dict]) -> str:
    head = "| G games | S slots | mean / longest game | steps | fill | moves/s | vs S = G |"
    lines = [head, "|" + "|".join(["---:"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        lines.append(
            f"| {r['games']} | {r['slots']} | {r['mean_game_length']:.1f} / {r['longest_game']} "
            f"| {r['call_steps']} | **{r['fill']:.0%}** | {r['moves_per_s']:,.1f} "
            f"| **{r['speedup']:.2f}x** |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "config",
        nargs="?",
        default=str(Path(__file__).resolve().parents[1] / "configs" / "go9_strong.py"),
        help="a run config (default: configs/go9_strong.py)",
    )
    parser.add_argument("--checkpoint", help="a gojax train workdir: play its newest network")
    parser.add_argument("--games", type=int, default=64, help="G, whole games a call (64)")
    parser.add_argument("--slots", default="64,32,16", help="S values, comma-separated")
    parser.add_argument("--repeats", type=int, default=1, help="timed calls of each (1)")
    parser.add_argument("--smoke", action="store_true", help="5x5, a tiny net: seconds")
    parser.add_argument("--json", help="also write the JSON summary to this file")
    args, overrides = parse_with_overrides(parser)
    if args.smoke:
        overrides = SMOKE + ["--config.board.max_moves=12"] + overrides
        args.games, args.slots = 4, "4,2"
    slots = [int(s) for s in args.slots.split(",")]
    if any(not 1 <= s <= args.games for s in slots):
        parser.error(f"--slots must be in 1..--games ({args.games}), not {args.slots}")
    run = prepare(args.config, overrides)
    variables = run.variables
    if args.checkpoint:
        try:
            variables = restore_variables(args.checkpoint).variables
        except ValueError as error:
            parser.error(str(error))
    rows = measure(run, variables, args.games, slots, args.repeats)
    print(table(rows))
    write_summary(
        "selfplay_slots",
        rows,
        args.json,
        config=os.path.basename(args.config),
        checkpoint=args.checkpoint,
        overrides=" ".join(overrides),
        devices=jax.local_device_count(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
