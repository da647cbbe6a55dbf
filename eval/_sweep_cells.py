"""Playing a sweep's cells and recording them: the agents, the games, the cell files.

``_Agents`` builds a cell's agent and opponent from the swept run's checkpoints
(and other runs'); ``_play_cell`` plays its games into one row; ``read_cell``
reads a finished cell's file back, reporting a damaged one (``DamagedFileWarning``)
so that it is played again, and ``_check_manifest`` keeps a restart to the
settings the sweep began with. Kept apart from ``eval.sweep`` (which re-exports
these names) because this is what a resumed sweep relies on, apart from how the
grid is planned and summarised.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import warnings
import zlib
from pathlib import Path
from typing import Any

from eval._sweep_config import (
    Cell,
    _parse_opponent,
    _rollout_weights,
    _split_lambda,
    _split_run,
    _uct_arg,
    agent_name,
    rollout_policy_label,
    run_label,
)
from gojax.atomic import DamagedFileWarning, write_atomic
from train.config_checks import is_int, is_number

CELLS_DIR = "cells"
MANIFEST = "sweep.json"


# ----------------------------------------------------------------------------
# Files.


def _check_manifest(workdir: Path, settings: dict[str, Any], *, write: bool = True) -> None:
    """Raise ValueError unless ``workdir/sweep.json`` holds ``settings``; write it if
    absent (``write``) or raise that it is missing (the other processes of a job,
    which only read what process 0 wrote)."""
    path = workdir / MANIFEST
    if not write and not path.exists():
        raise ValueError(f"{path}: missing (process 0 writes it; did it fail?)")
    if path.exists():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise ValueError(f"{path}: unreadable ({err})") from None
        if "rollout_lambda" in stored:
            raise ValueError(
                f"{workdir} holds a sweep whose cells all mixed rollouts with lambda "
                f"{stored['rollout_lambda']} (from before lambda was part of each cell); "
                "start a new workdir"
            )
        differ = [k for k in settings if stored.get(k) != settings[k]]
        if differ:
            detail = "; ".join(f"{k}: {stored.get(k)!r} there, {settings[k]!r} now" for k in differ)
            raise ValueError(f"{workdir} holds a sweep with other settings ({detail})")
    else:
        write_atomic(path, json.dumps(settings, indent=2) + "\n")


def read_cell(workdir: Path, cell: Cell) -> dict[str, Any] | None:
    """The finished cell's row, or None if it has not been played.

    A file that is not this cell's row (cut short, not JSON, fields missing or of
    the wrong type, counts that do not add up, another cell's) is reported with a
    ``DamagedFileWarning`` naming it and read as not played: the cell is played
    again and its file replaced, never counted in the results.
    """
    path = workdir / CELLS_DIR / f"{cell.id}.json"
    try:
        row = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError
        return _damaged(path, f"unreadable ({type(error).__name__}: {error})")
    if isinstance(row, dict):
        row.setdefault("rollout_lambda", 0.0)  # cells from before lambda was an axis
    problem = _row_problem(row, cell)
    return _damaged(path, problem) if problem else row


def _damaged(path: Path, why: str) -> None:
    warnings.warn(f"{path}: {why}; the cell is played again", DamagedFileWarning, stacklevel=3)
    return None


# A cell row's fields and what each holds (``_play_cell`` writes them).
_ROW_TYPES = {
    **{name: str for name in ("cell", "kind", "agent", "opponent", "opponent_name")},
    **{
        name: int
        for name in ("step", "simulations", "games", "wins", "draws", "losses", "resignations")
    },
    **{
        name: float
        for name in (
            "c_puct",
            "rollout_lambda",
            "win_rate",
            "ci95_lo",
            "ci95_hi",
            "win_rate_as_black",
            "win_rate_as_white",
            "mean_length",
            "seconds",
            "games_per_second",
        )
    },
}


def _row_problem(row: Any, cell: Cell) -> str | None:
    """Why ``row`` is not ``cell``'s finished row, or None if it is."""
    if not isinstance(row, dict):
        return f"not a cell's row (a JSON {type(row).__name__})"
    missing = [name for name in _ROW_TYPES if name not in row]
    if missing:
        return f"not a cell's row (no {', '.join(missing)})"
    for name, kind in _ROW_TYPES.items():
        value = row[name]
        ok = is_number(value) if kind is float else isinstance(value, kind)
        if not ok or (kind is int and not is_int(value)):
            return f"not a cell's row ({name}={value!r} is not {_KIND_NAMES[kind]})"
    if row["cell"] != cell.id:
        return f"the row of cell {row['cell']!r}, not of {cell.id!r}"
    if min(row["wins"], row["draws"], row["losses"]) < 0 or (
        row["wins"] + row["draws"] + row["losses"] != row["games"]
    ):
        counts = f"{row['wins']} + {row['draws']} + {row['losses']}"
        return f"wins, draws and losses ({counts}) do not add up to its {row['games']} games"
    return None


_KIND_NAMES = {str: "a string", int: "an integer", float: "a number"}


# ----------------------------------------------------------------------------
# Agents.


class _Agents:
    """Builds the cells' agents from one training run (and ``run:`` opponents' runs).

    Restored checkpoints are cached; every net is searched over the same move set,
    and those that mix rollouts into their leaf values play ``rollouts`` games a
    leaf (with ``rollout_policy``'s moves if one is given).
    """

    def __init__(
        self,
        workdir: str,
        first_step: int,
        moves: str | None = None,
        label: str = "",
        rollouts: int = 1,
        rollout_policy: str = "",
    ):
        self.workdir = workdir
        self.label = label
        self.rollouts = int(rollouts)
        self.rollout_policy = str(rollout_policy or "")
        self.restore = functools.lru_cache(maxsize=8)(self._restore)
        self.run_config = self.restore(workdir, first_step).config  # the run's config, as saved
        run_moves = self.run_config.get("selfplay", {}).get("moves", "legal")
        self.moves = moves or run_moves

    @staticmethod
    def _restore(workdir: str, step: int):
        from train.checkpoint import restore_variables

        return restore_variables(workdir, step)

    def searcher(
        self,
        step: int,
        kind: str,
        simulations: int,
        c_puct: float,
        workdir: str | None = None,
        rollout_lambda: float = 0.0,
    ):
        """Checkpoint ``step`` of the swept run (or of ``workdir``) searching as a cell
        says, its leaves valued ``(1 - rollout_lambda) * net + rollout_lambda * rollouts``."""
        from eval.arena import search_agent
        from gojax.search import SearchConfig
        from train.model import spec_from_config

        workdir = workdir or self.workdir
        label = self.label if workdir == self.workdir else run_label(workdir)
        run = self.restore(workdir, step)
        model = run.config["model"]
        search = SearchConfig(
            kind=kind,
            num_simulations=simulations,
            pb_c_init=c_puct,
            dirichlet_fraction=0.0,
            temperature_moves=0,
            gumbel_scale=0.0,  # Gumbel searches the net's favourites: its strongest play
            moves=self.moves,
        )
        policy = self.rollout_policy if rollout_lambda else ""
        rollout_label = rollout_policy_label(policy) if policy else ""
        name = agent_name(step, kind, simulations, c_puct, label, rollout_lambda, rollout_label)
        spec = spec_from_config(model)
        return search_agent(
            spec,
            run.variables,
            search,
            name=name,
            rollout_lambda=rollout_lambda,
            rollouts=self.rollouts,
            rollout_weights=_rollout_weights(policy) if policy else None,
        )

    def check_board(self, workdir: str, step: int, size: int) -> None:
        """Raise ValueError unless ``run:`` opponent ``workdir`` was trained on ``size``."""
        other = self.restore(workdir, step).config["board"]["size"]
        if int(other) != size:
            raise ValueError(f"opponent run:{workdir} plays {other}x{other}, not {size}x{size}")

    def opponent(self, cell: Cell):
        from eval import arena

        kind, arg = _parse_opponent(cell.opponent)
        if kind == "random":
            return arena.random_agent()
        if kind == "capture":
            return arena.capture_agent()
        if kind == "uct":
            simulations, policy = _uct_arg(arg)
            if not policy:
                return arena.uct_agent(simulations, moves=self.moves)
            return arena.uct_agent(
                simulations,
                moves=self.moves,
                rollout_weights=_rollout_weights(policy),
                rollout_label=rollout_policy_label(policy),
            )
        if kind == "gnugo":
            return arena.gnugo_agent(int(arg))
        lam = _split_lambda(cell.opponent)[1]
        lam = cell.rollout_lambda if lam is None else lam
        search = (cell.kind, cell.simulations, cell.c_puct)
        if kind == "run":
            workdir, step = _split_run(arg)
            return self.searcher(int(step), *search, workdir, rollout_lambda=lam)
        return self.searcher(int(arg), *search, rollout_lambda=lam)


def _cell_key(seed: int, cell: Cell):
    import jax

    return jax.random.fold_in(jax.random.PRNGKey(seed), zlib.crc32(cell.id.encode()) & 0x7FFFFFFF)


def _make_mesh(num_devices: int):
    import jax
    import numpy as np
    from jax.sharding import Mesh

    from eval.arena import GAMES_AXIS

    devices = jax.local_devices()  # a cell is one host's program, in a job of several too
    n = num_devices or len(devices)
    if n > len(devices):
        raise ValueError(f"games.num_devices={n} but only {len(devices)} devices exist")
    return Mesh(np.asarray(devices[:n]), (GAMES_AXIS,)) if n > 1 else None


def _play_cell(
    cell: Cell, agents: _Agents, config, board: dict[str, Any], mesh, workdir: Path
) -> dict[str, Any]:
    from eval.arena import play_games

    g = config.games
    agent = agents.searcher(
        cell.step, cell.kind, cell.simulations, cell.c_puct, rollout_lambda=cell.rollout_lambda
    )
    opponent = agents.opponent(cell)
    start = time.perf_counter()
    result = play_games(
        agent,
        opponent,
        _cell_key(config.seed, cell),
        size=board["size"],
        komi=board["komi"],
        rules=board["rules"],
        max_moves=board["max_moves"],
        num_games=g.num_games,
        opening_moves=g.opening_moves,
        resign_threshold=g.resign_threshold or None,
        batch_size=g.batch_size or None,
        mesh=mesh,
        sgf_dir=workdir / "sgf" / cell.id if g.sgf else None,
        move_timeout=g.move_timeout,
        referee=g.referee if cell.opponent.startswith("gnugo:") else None,
    )
    seconds = time.perf_counter() - start
    s = result.summary()
    lo, hi = s["ci95"]
    return {
        "cell": cell.id,
        **dataclasses.asdict(cell),
        "agent": agent.name,
        "opponent_name": opponent.name,
        "games": s["games"],
        "wins": s["wins"],
        "draws": s["draws"],
        "losses": s["losses"],
        "win_rate": s["win_rate"],
        "ci95_lo": lo,
        "ci95_hi": hi,
        "win_rate_as_black": s["win_rate_as_black"],
        "win_rate_as_white": s["win_rate_as_white"],
        "mean_length": s["mean_length"],
        "resignations": s["resignations"],
        "seconds": seconds,
        "games_per_second": s["games"] / max(seconds, 1e-9),
    }
