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
(``games.num_devices``, 0: all) with a ``jax.sharding.Mesh`` over the game
batch. Each cell's games are fixed by
``seed`` and the cell id, whatever the batch size, device count or order.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import io
import itertools
import json
import math
import os
import re
import shlex
import sys
import time
import warnings
import zlib
from pathlib import Path
from typing import Any

import ml_collections

from eval.arguments import positive
from eval.gtp_client import split_command
from gojax import get_rules
from gojax.atomic import DamagedFileWarning, write_atomic
from train.config_checks import (
    KeyRanges,
    bad_value,
    check_keys,
    check_ranges,
    is_int,
    is_number,
)

__all__ = [
    "Cell",
    "cells_of",
    "default_config",
    "plot_elo_vs_step",
    "plot_win_rates",
    "register",
    "run_sweep",
]

CELLS_DIR = "cells"
MANIFEST = "sweep.json"
CSV_FIELDS = (
    "cell",
    "step",
    "kind",
    "simulations",
    "c_puct",
    "rollout_lambda",
    "agent",
    "opponent",
    "opponent_name",
    "games",
    "wins",
    "draws",
    "losses",
    "win_rate",
    "ci95_lo",
    "ci95_hi",
    "win_rate_as_black",
    "win_rate_as_white",
    "mean_length",
    "resignations",
    "seconds",
    "games_per_second",
)
OPPONENT_FORMS = (
    "random, capture, uct:<simulations>[:<rollout policy .npz>], "
    "checkpoint:<step|latest>[@lam<lambda>], run:<workdir>[:<step|latest>][@lam<lambda>], "
    "gnugo:<level>"
)


def default_config() -> ml_collections.ConfigDict:
    """Every key a sweep config has, with defaults; ``configs/sweep_*.py`` start from this.

    ``board`` keys left None take the training run's value. ``games.batch_size``
    0 plays a cell's games in one batch; ``resign_threshold`` 0 disables
    resignation; ``checkpoints.steps`` empty means every checkpoint of the run
    (-1: the newest). ``games.referee``, a GTP command (``"gnugo --mode gtp"``),
    counts the gnugo cells' games that end by two passes with its
    ``final_score``: under chinese, aga or japanese rules GnuGo passes with
    dead stones on the board, which the board's own count takes as alive.
    """
    c = ml_collections.ConfigDict()
    c.seed = 0
    # label: the run's name in the ratings (needed only to tell runs apart: run: opponents).
    c.checkpoints = ml_collections.ConfigDict(dict(workdir="", steps=(), label=""))
    c.search = ml_collections.ConfigDict(
        # moves: SearchConfig.moves of the net's and UCT's searches; None = the run's own.
        # rollout_lambda (a grid axis), rollouts: every net search values its leaves as
        # AlphaGo's did, (1 - lambda) * net + lambda * mean of `rollouts` random games
        # (0: the net alone);
        # rollout_policy: a gojax train-rollout rollout_policy.npz that plays those games
        # ("": uniform random moves).
        dict(
            kinds=("puct",),
            simulations=(8, 16),
            c_puct=(1.25,),
            moves=None,
            rollout_lambda=(0.0,),
            rollouts=1,
            rollout_policy="",
        )
    )
    c.opponents = ("random", "uct:16")
    c.board = ml_collections.ConfigDict(dict(komi=None, rules=None, max_moves=None))
    c.games = ml_collections.ConfigDict(
        dict(
            num_games=32,
            batch_size=0,
            opening_moves=0,
            resign_threshold=0.0,
            sgf=False,
            num_devices=0,
            move_timeout=60.0,
            referee="",
        )
    )
    c.ratings = ml_collections.ConfigDict(dict(anchor="random", anchor_elo=0.0))
    c.plots = True
    return c


@dataclasses.dataclass(frozen=True)
class Cell:
    """One point of the grid."""

    step: int
    kind: str
    simulations: int
    c_puct: float
    opponent: str
    rollout_lambda: float = 0.0

    @property
    def id(self) -> str:
        """File-name-safe and unique: ``step00000100_puct_s16_c1.25_vs_uct-16``, with
        ``_lam0.5`` after the c when the agent mixes rollouts into its leaf values."""
        opponent = re.sub(r"[^A-Za-z0-9.]+", "-", self.opponent)
        mix = f"_lam{self.rollout_lambda:g}" if self.rollout_lambda else ""
        search = f"{self.kind}_s{self.simulations}_c{self.c_puct:g}{mix}"
        return f"step{self.step:08d}_{search}_vs_{opponent}"


def agent_name(
    step: int,
    kind: str,
    simulations: int,
    c_puct: float,
    label: str = "",
    rollout_lambda=0.0,
    rollout_label: str = "",
) -> str:
    """``step1200/puct16/c1.25``, or ``label/step1200/puct16/c1.25`` for a named run;
    ``.../c1.25/lam0.5`` when its leaves are mixed with rollouts, ``.../lam0.5+fast``
    when a rollout policy (named ``rollout_label``) plays them."""
    name = f"step{step}/{kind}{simulations}/c{c_puct:g}"
    name += f"/lam{rollout_lambda:g}" if rollout_lambda else ""
    name += f"+{rollout_label}" if rollout_lambda and rollout_label else ""
    return f"{label}/{name}" if label else name


def rollout_policy_label(path: str) -> str:
    """How agents name a rollout policy file: its workdir's name for ``<workdir>/
    rollout_policy.npz`` (what ``gojax train-rollout`` writes), else the file's stem."""
    file = Path(path)
    return (file.parent.name or "fast") if file.name == "rollout_policy.npz" else file.stem


@functools.lru_cache(maxsize=8)
def _rollout_weights(path: str):
    from gojax.rollout_policy import load

    return load(path)


# ----------------------------------------------------------------------------
# Config checks.


# The numeric keys of a sweep config; tuples (the grid's axes) element by element.
SWEEP_RANGES = KeyRanges(
    at_least_one=("search.simulations", "search.rollouts", "games.num_games"),
    at_least_zero=("seed", "games.batch_size", "games.opening_moves", "games.num_devices"),
    fractions=("search.rollout_lambda", "games.resign_threshold"),
    positive=("search.c_puct", "games.move_timeout"),
)


def check_config(config: ml_collections.ConfigDict) -> None:
    """Raise ValueError naming unknown keys or bad values (before anything runs)."""
    from gojax.search import KINDS, MOVE_SETS

    check_keys(config, default_config())
    if not config.checkpoints.workdir:
        raise ValueError("checkpoints.workdir is not set (a training run's workdir)")
    steps = config.checkpoints.steps
    if not all(is_int(step) and step >= -1 for step in steps):
        raise bad_value("checkpoints.steps", steps, "checkpoint steps of the run (-1: the newest)")
    for name in ("kinds", "simulations", "c_puct", "rollout_lambda"):
        if not config.search[name]:
            raise bad_value(f"search.{name}", config.search[name], "a non-empty tuple (an axis)")
    check_ranges(config, SWEEP_RANGES)
    if any(kind not in KINDS for kind in config.search.kinds):
        raise bad_value("search.kinds", config.search.kinds, f"one of {KINDS}", each=True)
    moves = config.search.moves
    if moves is not None and (not isinstance(moves, str) or moves not in MOVE_SETS):
        raise bad_value("search.moves", config.search.moves, f"one of {tuple(MOVE_SETS)} or None")
    _check_board_overrides(config.board)
    if not math.isfinite(config.ratings.anchor_elo):
        raise bad_value("ratings.anchor_elo", config.ratings.anchor_elo, "a finite number")
    if not config.opponents:
        raise bad_value("opponents", config.opponents, "a non-empty tuple")
    kinds = {_parse_opponent(opponent)[0] for opponent in config.opponents}
    if config.search.rollout_policy:
        if not _mixes_rollouts(config):
            raise ValueError(
                "search.rollout_policy plays the leaves' rollouts: it needs "
                "search.rollout_lambda > 0 (or an opponent's @lam > 0)"
            )
        _rollout_weights(str(config.search.rollout_policy))  # a clear error if unreadable
    if config.games.referee and "gnugo" not in kinds:
        raise ValueError("games.referee counts GTP games: it needs a gnugo: opponent")


def _check_board_overrides(board: ml_collections.ConfigDict) -> None:
    """``board`` keys are None (the run's) or a value of their own type and range: their
    None defaults let any type through ``check_keys``."""
    if board.komi is not None and not (is_number(board.komi) and math.isfinite(board.komi)):
        raise bad_value("board.komi", board.komi, "a finite number, or None (the run's)")
    if board.max_moves is not None and not (is_int(board.max_moves) and board.max_moves >= 0):
        raise bad_value("board.max_moves", board.max_moves, "an integer, 0 or more, or None")
    if board.rules is not None:
        try:
            get_rules(board.rules)
        except (ValueError, TypeError) as error:
            raise bad_value("board.rules", board.rules, f"a rule set or None ({error})") from None


def _lambdas(config: ml_collections.ConfigDict) -> tuple[float, ...]:
    """The grid's rollout lambdas (a bare number is one)."""
    value = config.search.rollout_lambda
    return tuple(float(x) for x in (value if isinstance(value, tuple | list) else (value,)))


def _mixes_rollouts(config: ml_collections.ConfigDict) -> bool:
    """Whether any search of the sweep plays rollouts at its leaves."""
    opponents = (_split_lambda(text)[1] for text in config.opponents)
    return any(_lambdas(config)) or any(opponents)


def _split_lambda(text: str) -> tuple[str, float | None]:
    """``"checkpoint:20@lam0.5"`` → ``("checkpoint:20", 0.5)``; without ``@lam``, None."""
    base, sep, value = str(text).rpartition("@lam")
    if not sep:
        return str(text), None
    try:
        lam = float(value)
    except ValueError:
        lam = float("nan")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"opponent {text!r}: @lam takes a rollout lambda in [0, 1]")
    return base, lam


def _parse_opponent(text: str) -> tuple[str, str | None]:
    """``"uct:16"`` → ``("uct", "16")``, ``"checkpoint:20@lam0.5"`` → ``("checkpoint",
    "20")`` (the lambda: ``_split_lambda``); raises ValueError listing the known forms."""
    base, lam = _split_lambda(text)
    kind, _, arg = base.partition(":")
    ok = {
        "random": not arg,
        "capture": not arg,
        "uct": _uct_arg(arg) is not None,
        "checkpoint": _is_step(arg),
        "run": bool(_split_run(arg)[0]),
        "gnugo": arg.isdigit() and 0 <= int(arg) <= 10,
    }
    if not ok.get(kind, False):
        raise ValueError(f"unknown opponent {text!r}; known forms: {OPPONENT_FORMS}")
    if lam is not None and kind not in ("checkpoint", "run"):
        raise ValueError(
            f"opponent {text!r}: only checkpoint: and run: opponents take @lam<lambda> "
            "(the nets searched like the cell's agent)"
        )
    return kind, arg or None


def _uct_arg(arg: str) -> tuple[int, str] | None:
    """``"128"`` → ``(128, "")``, ``"128:runs/r/rollout_policy.npz"`` → ``(128, path)``;
    None if malformed."""
    simulations, sep, path = arg.partition(":")
    if not simulations.isdigit() or int(simulations) < 1 or (sep and not path):
        return None
    return int(simulations), path


def _is_step(text: str) -> bool:
    return text == "latest" or text.lstrip("-").isdigit()


def _split_run(arg: str) -> tuple[str, str]:
    """``"runs/a:300"`` → ``("runs/a", "300")``; without a step, ``"latest"``."""
    workdir, sep, step = arg.rpartition(":")
    return (workdir, step) if sep and _is_step(step) else (arg, "latest")


def run_label(workdir: str) -> str:
    """The name of another run's agents in the ratings: its workdir's last folder."""
    return Path(workdir).name or str(workdir)


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
# Files.


def _check_manifest(workdir: Path, settings: dict[str, Any]) -> None:
    path = workdir / MANIFEST
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

    devices = jax.devices()
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
    workdir.mkdir(parents=True, exist_ok=True)
    _check_manifest(workdir, {**_shared_settings(config, board), "moves": agents.moves})
    # Each cell file read once: a damaged one is reported once, then played again.
    finished = {cell: read_cell(workdir, cell) for cell in grid}
    todo = [cell for cell in grid if finished[cell] is None]
    done = len(grid) - len(todo)
    if max_cells is not None:
        todo = todo[: int(max_cells)]
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(grid), initial=done, unit="cell", dynamic_ncols=True)
    try:
        for cell in todo:
            if bar is not None:
                bar.set_postfix_str(cell.id, refresh=True)
            row = _play_cell(cell, agents, config, board, mesh, workdir)
            write_atomic(workdir / CELLS_DIR / f"{cell.id}.json", json.dumps(row, indent=2) + "\n")
            finished[cell] = row
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    rows = [finished[cell] for cell in grid if finished[cell] is not None]
    ratings = _ratings(rows, config)
    compute = {step: checkpoint_counters(run, step) for step in sorted({r["step"] for r in rows})}
    write_summaries(workdir, rows, ratings, plots=config.plots, compute=compute)
    return {"cells": rows, "played": len(todo), "total": len(grid), "ratings": ratings}


def _ratings(rows: list[dict[str, Any]], config) -> dict | None:
    """Bradley-Terry ratings of every agent and opponent in ``rows``, or None if not rateable."""
    from eval.ratings import PairCounts, fit_ratings

    # A checkpoint against itself with the same search says nothing about ratings.
    rated = [r for r in rows if r["agent"] != r["opponent_name"]]
    if not rated:
        return None
    counts = [
        PairCounts(r["agent"], r["opponent_name"], r["wins"], r["draws"], r["losses"])
        for r in rated
    ]
    names = {r["agent"] for r in rated} | {r["opponent_name"] for r in rated}
    anchor = config.ratings.anchor
    anchor = anchor if anchor in names else rated[0]["opponent_name"]
    try:
        return fit_ratings(counts, anchor=anchor, anchor_elo=config.ratings.anchor_elo)
    except ValueError:
        return None  # e.g. disjoint pools: the cells still stand on their own


def write_summaries(
    workdir: Path,
    rows: list[dict[str, Any]],
    ratings,
    *,
    plots: bool,
    compute: dict[int, dict[str, Any]] | None = None,
) -> None:
    """``results.csv``, ``results.json``, ``ratings.txt`` and the plots (all atomic).

    ``compute``: each step's training counters (``train.continuation.checkpoint_counters``);
    where they hold self-play games and CPU seconds, ``elo_vs_compute.png`` too."""
    from eval.ratings import plot_ratings, ratings_table

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row[k] for k in CSV_FIELDS})
    write_atomic(workdir / "results.csv", buffer.getvalue())
    payload = {
        "cells": rows,
        "ratings": None
        if ratings is None
        else {k: dataclasses.asdict(v) for k, v in ratings.items()},
        **({"compute": {str(k): v for k, v in compute.items()}} if compute else {}),
    }
    write_atomic(workdir / "results.json", json.dumps(payload, indent=2) + "\n")
    if ratings is not None:
        write_atomic(workdir / "ratings.txt", ratings_table(ratings) + "\n")
    if not plots or not rows:
        return
    plot_win_rates(rows, workdir / "win_rate_vs_simulations.png")
    if ratings is not None:
        plot_ratings(ratings, workdir / "ratings.png", title="Sweep ratings (95% intervals)")
        if len({r["step"] for r in rows}) > 1:
            plot_elo_vs_step(rows, ratings, workdir / "elo_vs_step.png")
        counted = {s: c for s, c in (compute or {}).items() if "cpu_seconds" in c and "games" in c}
        if len(counted) > 1:
            plot_elo_vs_compute(rows, ratings, counted, workdir / "elo_vs_compute.png")


def plot_win_rates(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    opponents = list(dict.fromkeys(r["opponent"] for r in rows))
    fig, axes = plt.subplots(
        1, len(opponents), figsize=(4.5 * len(opponents), 3.8), squeeze=False, sharey=True
    )
    for ax, opponent in zip(axes[0], opponents, strict=True):
        series: dict[tuple, list[dict]] = {}
        for r in rows:
            if r["opponent"] == opponent:
                key = (r["step"], r["kind"], r["c_puct"], r.get("rollout_lambda", 0.0))
                series.setdefault(key, []).append(r)
        for (step, kind, c_puct, lam), points in series.items():
            points.sort(key=lambda r: r["simulations"])
            x = [r["simulations"] for r in points]
            y = [r["win_rate"] for r in points]
            err = [
                [r["win_rate"] - r["ci95_lo"] for r in points],
                [r["ci95_hi"] - r["win_rate"] for r in points],
            ]
            label = f"step {step}, {kind}, c {c_puct:g}" + (f", λ {lam:g}" if lam else "")
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ticks = sorted({r["simulations"] for r in rows})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_ylim(0, 1)
        ax.set_title(f"vs {opponent}")
        ax.set_xlabel("simulations")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0][0].set_ylabel("win rate (95% interval)")
    fig.tight_layout()
    save_figure(fig, path)


def plot_elo_vs_step(rows: list[dict[str, Any]], ratings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    series: dict[tuple, dict[int, Any]] = {}
    for r in rows:
        rating = ratings.get(r["agent"])
        if rating is not None:
            key = (r["kind"], r["simulations"], r["c_puct"], r.get("rollout_lambda", 0.0))
            series.setdefault(key, {})[r["step"]] = rating
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (kind, sims, c_puct, lam), by_step in series.items():
        steps = sorted(by_step)
        elo = [by_step[s].elo for s in steps]
        err = [
            [by_step[s].elo - by_step[s].lo for s in steps],
            [by_step[s].hi - by_step[s].elo for s in steps],
        ]
        label = f"{kind} {sims} sims, c {c_puct:g}" + (f", λ {lam:g}" if lam else "")
        ax.errorbar(steps, elo, yerr=err, marker="o", capsize=3, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("Elo (95% interval)")
    ax.set_title("Strength over training")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)


def plot_elo_vs_compute(
    rows: list[dict[str, Any]], ratings, compute: dict[int, dict[str, Any]], path: Path
) -> None:
    """Elo of the run's nets against the compute behind them: self-play games (left) and
    CPU-hours (right), the fixed opponents' ratings as dashed levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    series: dict[tuple, dict[int, Any]] = {}
    for r in rows:
        rating = ratings.get(r["agent"])
        if rating is not None and r["step"] in compute:
            key = (r["kind"], r["simulations"], r["c_puct"], r.get("rollout_lambda", 0.0))
            series.setdefault(key, {})[r["step"]] = rating
    agents = {r["agent"] for r in rows}
    anchors = {
        r["opponent_name"]: ratings[r["opponent_name"]]
        for r in rows
        if r["opponent_name"] in ratings and r["opponent_name"] not in agents
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, (field, scale, label) in zip(
        axes,
        (("games", 1.0, "self-play games"), ("cpu_seconds", 1 / 3600, "CPU-hours")),
        strict=True,
    ):
        for (kind, sims, c_puct, lam), by_step in series.items():
            steps = sorted(by_step)
            x = [float(compute[s][field]) * scale for s in steps]
            err = [
                [by_step[s].elo - by_step[s].lo for s in steps],
                [by_step[s].hi - by_step[s].elo for s in steps],
            ]
            name = f"{kind} {sims} sims, c {c_puct:g}" + (f", λ {lam:g}" if lam else "")
            ax.errorbar(
                x, [by_step[s].elo for s in steps], yerr=err, marker="o", capsize=3, label=name
            )
        for i, (name, rating) in enumerate(sorted(anchors.items(), key=lambda kv: kv[1].elo)):
            ax.axhline(rating.elo, ls="--", lw=1, color=f"C{(i + 3) % 10}", label=name)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Elo (95% interval)")
    axes[0].legend(fontsize="small")
    fig.suptitle("Strength against the compute behind it")
    fig.tight_layout()
    save_figure(fig, path)


def format_results(rows: list[dict[str, Any]]) -> str:
    """The cells as a table: agent, opponent, games, win rate and its 95% interval."""
    width = max([5] + [len(r["agent"]) for r in rows])
    owidth = max([8] + [len(r["opponent_name"]) for r in rows])
    lines = [f"{'agent':<{width}}  {'opponent':<{owidth}}  {'games':>5}  {'win rate':>8}  95% CI"]
    for r in rows:
        lines.append(
            f"{r['agent']:<{width}}  {r['opponent_name']:<{owidth}}  {r['games']:>5}  "
            f"{r['win_rate']:>8.3f}  [{r['ci95_lo']:.3f}, {r['ci95_hi']:.3f}]"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# gojax sweep


def cmd_sweep(args: argparse.Namespace) -> int:
    from eval.ratings import ratings_table
    from train.loop import apply_overrides, load_config

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    summary = run_sweep(config, args.workdir, max_cells=args.max_cells, progress=not args.quiet)
    print(format_results(summary["cells"]))
    if summary["ratings"] is not None:
        print()
        print(ratings_table(summary["ratings"]))
    left = summary["total"] - len(summary["cells"])
    state = "complete" if not left else f"{left} cells left (run again to continue)"
    print(
        f"\n{summary['played']} cells played, {len(summary['cells'])}/{summary['total']} "
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
