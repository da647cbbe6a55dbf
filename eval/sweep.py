"""Evaluation sweeps: a grid of checkpoints x search settings x opponents, as batched games.

``gojax sweep --config configs/sweep_go9_tiny.py --workdir DIR`` plays every
cell of the grid

    checkpoints.steps x search.kinds x search.simulations x search.c_puct
        x search.rollout_lambda x opponents

(a cell: one checkpoint of a training run, searched one way, against one
opponent, ``games.num_games`` games with colours alternating) and writes

* ``DIR/sweep.json``: the settings every cell shares; a restart must match them;
* ``DIR/cells/<cell-id>.json``: one file per finished cell, written atomically:
  a restart skips these, so an interrupted sweep resumes where it stopped (a
  damaged one is reported, never counted, and its cell played again);
* ``DIR/results.csv`` and ``DIR/results.json``: every finished cell of the
  grid, plus (JSON) the Bradley-Terry ratings of the pool;
* ``DIR/ratings.txt``, ``DIR/ratings.png``, ``DIR/win_rate_vs_simulations.png``
  and, with several checkpoints, ``DIR/elo_vs_step.png``;
* ``DIR/sgf/<cell-id>/`` with ``games.sgf = True``.

Opponents: ``random``, ``capture``, ``uct:<simulations>`` (classical UCT with
random rollouts; ``uct:<simulations>:<file>`` plays them with a fast rollout
policy, ``gojax train-rollout``'s ``rollout_policy.npz``), ``checkpoint:<step>``
(another checkpoint of the run, ``latest`` for the newest, searched like the
cell's agent), ``run:<workdir>[:<step>]`` (a checkpoint of another training
run on the same board, by default its newest, also searched like the cell's
agent: two runs compared under one search) and ``gnugo:<level>`` (GnuGo over
GTP, move by move). A ``checkpoint:`` or ``run:`` opponent may name its own
AlphaGo leaf mix, ``checkpoint:latest@lam0.5``: searched like the cell's
agent but with that rollout lambda (AlphaGo's Fig. 4b: one net with the
value network alone, rollouts alone and their mix, against each other).
``checkpoints.label`` names the swept run in the ratings
(``label/step1200/puct16/c1.25``); another run is named by its workdir's
last folder. Games of JAX agents are split across all devices
(``games.num_devices``, 0: all of this host's) with a ``jax.sharding.Mesh``
over the game batch. Each cell's games are fixed by
``seed`` and the cell id, whatever the batch size, device count or order.

Across hosts: the same command started on every process of a
``jax.distributed`` job (``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``,
``JAX_PROCESS_ID``; or ``--config.multihost=true`` on a TPU pod slice), with
``DIR`` on a filesystem they share, splits the grid: cell ``i`` (in grid
order) is process ``i % process_count``'s, which plays it on its own host's
devices and writes its file (with a ``"process"`` field naming it). Process 0
writes ``sweep.json`` (the others wait for it, then check it) and, once every
process has played its share, the summaries; it alone prints the tables and
draws the progress bar, counting its own share. A restart of every process
resumes as one process does (``eval._sweep_hosts``).

This module plans the grid (``cells_of``), runs it (``run_sweep``) and holds
``gojax sweep``; the rest lives in private modules and is re-exported here, so
that ``from eval.sweep import X`` works for all of it: the config's keys, checks
and the opponent forms (``eval._sweep_config``), playing and recording the cells
(``eval._sweep_cells``), the summaries, ratings and plots
(``eval._sweep_summaries``) and the split between processes
(``eval._sweep_hosts``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import ml_collections

from eval._sweep_cells import CELLS_DIR, _Agents, _check_manifest, _make_mesh, _play_cell, read_cell
from eval._sweep_cells import MANIFEST as MANIFEST
from eval._sweep_config import OPPONENT_FORMS as OPPONENT_FORMS
from eval._sweep_config import SWEEP_RANGES as SWEEP_RANGES
from eval._sweep_config import (
    Cell,
    _lambdas,
    _mixes_rollouts,
    _parse_opponent,
    _rollout_weights,
    _split_lambda,
    _split_run,
    _uct_arg,
    check_config,
)
from eval._sweep_config import agent_name as agent_name
from eval._sweep_config import default_config as default_config
from eval._sweep_config import rollout_policy_label as rollout_policy_label
from eval._sweep_config import run_label as run_label
from eval._sweep_hosts import join_job, own_cells, then_wait_for_all, this_process, wait_for_all
from eval._sweep_summaries import CSV_FIELDS as CSV_FIELDS
from eval._sweep_summaries import _ratings, format_results, write_summaries
from eval._sweep_summaries import plot_elo_vs_compute as plot_elo_vs_compute
from eval._sweep_summaries import plot_elo_vs_step as plot_elo_vs_step
from eval._sweep_summaries import plot_win_rates as plot_win_rates
from eval.arguments import positive
from eval.gtp_client import split_command
from gojax.atomic import write_atomic

__all__ = [
    "Cell",
    "cells_of",
    "default_config",
    "plot_elo_vs_step",
    "plot_win_rates",
    "register",
    "run_sweep",
]


# ----------------------------------------------------------------------------
# The grid.


def _resolve_step(step: int, available: list[int], workdir: str) -> int:
    if step == -1:
        return available[-1]
    if step not in available:
        raise ValueError(f"{workdir}: no checkpoint at step {step}; there are {available}")
    return step


def _resolve_run(arg: str) -> str:
    """``run:<workdir>:<step>`` with the step a checkpoint of that run (``latest`` resolved)."""
    from train.checkpoint import checkpoint_steps

    other, step = _split_run(arg)
    steps = checkpoint_steps(other)
    if not steps:
        raise ValueError(f"opponent run:{arg}: {other} has no checkpoints")
    resolved = steps[-1] if step == "latest" else _resolve_step(int(step), steps, other)
    return f"run:{other}:{resolved}"


def cells_of(config: ml_collections.ConfigDict, available: list[int]) -> list[Cell]:
    """Every cell of the grid, in order (steps, kinds, simulations, c_puct, rollout
    lambdas, opponents)."""
    workdir = config.checkpoints.workdir
    if not available:
        raise ValueError(f"{workdir}: no checkpoints (expected {workdir}/checkpoints/<step>/)")
    steps = config.checkpoints.steps or available
    steps = sorted({_resolve_step(int(s), available, workdir) for s in steps})
    opponents = []
    for text in config.opponents:
        kind, arg = _parse_opponent(text)
        lam = _split_lambda(text)[1]
        if kind == "checkpoint":
            step = available[-1] if arg == "latest" else int(arg)
            text = f"checkpoint:{_resolve_step(step, available, workdir)}"
        elif kind == "run":
            text = _resolve_run(arg)
        opponents.append(text if lam is None else f"{text}@lam{lam:g}")
    grid = itertools.product(
        steps,
        config.search.kinds,
        config.search.simulations,
        config.search.c_puct,
        dict.fromkeys(_lambdas(config)),
        dict.fromkeys(opponents),
    )
    return [Cell(int(s), str(k), int(n), float(c), o, lam) for s, k, n, c, lam, o in grid]


def _shared_settings(config: ml_collections.ConfigDict, board: dict[str, Any]) -> dict[str, Any]:
    """What every cell's games depend on besides the cell itself (``sweep.json``)."""
    g = config.games
    settings = {
        "run": os.path.abspath(config.checkpoints.workdir),
        "seed": int(config.seed),
        "board": board,
        "num_games": int(g.num_games),
        "opening_moves": int(g.opening_moves),
        "resign_threshold": float(g.resign_threshold),
    }
    if _mixes_rollouts(config):  # absent otherwise: sweeps from before it still resume
        settings["rollouts"] = int(config.search.rollouts)
    if config.search.rollout_policy:
        settings["rollout_policy"] = _file_digest(config.search.rollout_policy)
    if g.referee:  # absent otherwise, as rollouts
        settings["referee"] = shlex.join(split_command(g.referee))
    return settings


def _file_digest(path: str) -> str:
    """``sha256:<hex>`` of a file's bytes: a retrained rollout policy is another setting."""
    import hashlib

    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _board(config: ml_collections.ConfigDict, run_config: dict[str, Any]) -> dict[str, Any]:
    run = run_config["board"]
    b = config.board
    max_moves = b.max_moves if b.max_moves is not None else (run.get("max_moves") or None)
    return {
        "size": int(run["size"]),
        "komi": float(b.komi if b.komi is not None else run["komi"]),
        "rules": str(b.rules if b.rules is not None else run["rules"]),
        "max_moves": None if not max_moves else int(max_moves),
    }


# ----------------------------------------------------------------------------
# The sweep.


def run_sweep(
    config: ml_collections.ConfigDict,
    workdir: str | os.PathLike,
    *,
    max_cells: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Play the cells of ``config``'s grid not yet in ``workdir``, then write the summaries.

    ``max_cells`` stops after playing that many new cells (the summaries then
    cover the cells finished so far). Returns ``{"cells": rows of every
    finished cell in grid order, "played": new cells this call,
    "total": cells in the grid, "ratings": {name: Rating} or None}``.
    Raises ValueError for a bad config, missing checkpoints or a workdir
    holding a sweep with other settings.

    In a multi-process job (``jax.distributed``, ``eval._sweep_hosts``) every
    process calls this with the same config and workdir: each plays only its own
    share of the grid (``played`` and ``max_cells`` count its own cells; its rows
    carry ``"process"``, its index) on its own devices, and process 0 alone
    writes ``sweep.json`` and the summaries, once every process has finished.
    Every process returns the same ``cells`` and ``ratings``, read back from the
    cell files. The progress bar, on process 0 only, counts process 0's share.
    """
    from train.checkpoint import checkpoint_steps
    from train.continuation import checkpoint_counters

    check_config(config)
    workdir = Path(workdir)
    run = config.checkpoints.workdir
    grid = cells_of(config, checkpoint_steps(run))
    s = config.search
    agents = _Agents(
        run, grid[0].step, s.moves, config.checkpoints.label, s.rollouts, s.rollout_policy
    )
    board = _board(config, agents.run_config)
    for opponent in dict.fromkeys(cell.opponent for cell in grid):
        kind, arg = _parse_opponent(opponent)
        if kind == "run":
            other, step = _split_run(arg)
            agents.check_board(other, int(step), board["size"])
        if kind == "uct" and (policy := _uct_arg(arg)[1]):
            _rollout_weights(policy)  # a clear error before any game
    mesh = _make_mesh(config.games.num_devices)  # more devices than exist: before any write
    index, count = this_process()
    settings = {**_shared_settings(config, board), "moves": agents.moves}
    # sweep.json, never raced: process 0 checks or writes it, the others then check it.
    if index == 0:
        with then_wait_for_all("manifest"):
            workdir.mkdir(parents=True, exist_ok=True)
            _check_manifest(workdir, settings)
    else:
        wait_for_all("manifest")
        _check_manifest(workdir, settings, write=False)
    own = own_cells(grid, index, count)
    # Each cell file read once: a damaged one is reported once, then played again.
    finished = {cell: read_cell(workdir, cell) for cell in own}
    todo = [cell for cell in own if finished[cell] is None]
    done = len(own) - len(todo)
    if max_cells is not None:
        todo = todo[: int(max_cells)]
    with then_wait_for_all("cells"):  # process 0 summarises once every process is done
        bar = (done, len(own)) if progress and index == 0 else None  # one bar, not one a host
        finished.update(_play_cells(todo, agents, config, board, mesh, workdir, bar))
    # The other processes' cells, finished now: every process returns the whole grid.
    finished.update({cell: read_cell(workdir, cell) for cell in grid if cell not in finished})
    rows = [finished[cell] for cell in grid if finished[cell] is not None]
    ratings = _ratings(rows, config)
    if index == 0:
        steps = sorted({r["step"] for r in rows})
        compute = {step: checkpoint_counters(run, step) for step in steps}
        write_summaries(workdir, rows, ratings, plots=config.plots, compute=compute)
    return {"cells": rows, "played": len(todo), "total": len(grid), "ratings": ratings}


def _play_cells(
    todo: list[Cell],
    agents: _Agents,
    config: ml_collections.ConfigDict,
    board: dict[str, Any],
    mesh,
    workdir: Path,
    progress: tuple[int, int] | None,
) -> dict[Cell, dict[str, Any]]:
    """Play ``todo``'s cells one after another, writing each one's file as it finishes;
    their rows. ``progress``: ``(finished, total)`` cells of this process's share for a
    progress bar, or None."""
    index, count = this_process()
    bar = None
    if progress is not None and todo:
        from tqdm import tqdm

        done, total = progress
        bar = tqdm(total=total, initial=done, unit="cell", dynamic_ncols=True)
    rows = {}
    try:
        for cell in todo:
            if bar is not None:
                bar.set_postfix_str(cell.id, refresh=True)
            row = _play_cell(cell, agents, config, board, mesh, workdir)
            if count > 1:
                row["process"] = index  # which process of the job played it
            write_atomic(workdir / CELLS_DIR / f"{cell.id}.json", json.dumps(row, indent=2) + "\n")
            rows[cell] = row
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return rows


# ----------------------------------------------------------------------------
# gojax sweep


def cmd_sweep(args: argparse.Namespace) -> int:
    from eval.ratings import ratings_table
    from train.loop import apply_overrides, load_config

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    check_config(config)  # one line naming a bad key, before joining a job
    join_job(config.multihost)  # before anything touches a backend
    summary = run_sweep(config, args.workdir, max_cells=args.max_cells, progress=not args.quiet)
    index, count = this_process()
    played = f"{summary['played']} cells played"
    if count > 1:  # each process plays its own share; process 0 reports the sweep
        played += f" by process {index} of {count}"
    if index > 0:
        print(played, file=sys.stderr)
        return 0
    print(format_results(summary["cells"]))
    if summary["ratings"] is not None:
        print()
        print(ratings_table(summary["ratings"]))
    left = summary["total"] - len(summary["cells"])
    state = "complete" if not left else f"{left} cells left (run again to continue)"
    print(
        f"\n{played}, {len(summary['cells'])}/{summary['total']} "
        f"finished: {state}; results in {args.workdir}",
        file=sys.stderr,
    )
    return 0


def register(commands) -> None:
    """Add ``gojax sweep`` to the subcommands of the ``gojax`` parser."""
    from train.cli import add_config_command

    parser = add_config_command(
        commands,
        "sweep",
        help="evaluate checkpoints over a grid of search settings and opponents (resumable)",
        description="Plays every cell of a sweep config's grid as batched games; "
        "overrides: --config.KEY=VALUE, e.g. --config.games.num_games=64.",
    )
    parser.add_argument("--config", required=True, help="a Python sweep config with get_config()")
    parser.add_argument("--workdir", required=True, help="cells, results, plots (resumable)")
    parser.add_argument(
        "--max-cells", type=positive, default=None, help="stop after this many new cells"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=cmd_sweep, overrides=[])
