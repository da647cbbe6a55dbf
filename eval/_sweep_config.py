"""A sweep config: its keys, defaults and checks, the grid's cells, agents' and opponents' names.

``default_config()`` names every key of a sweep; ``check_config`` refuses a bad
one before anything runs; ``Cell`` is one point of the grid and ``agent_name`` how
its agent is named in the ratings; ``_parse_opponent`` and its helpers read the
opponent forms (``OPPONENT_FORMS``). Kept apart from ``eval.sweep`` (which
re-exports these names) because the config checks, the reports and the cells'
agents all read the same names without running a sweep.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path

import ml_collections

from gojax import get_rules
from train.config_checks import (
    KeyRanges,
    bad_value,
    check_keys,
    check_ranges,
    is_int,
    is_number,
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
    # Join a multi-process job with jax.distributed.initialize() and no arguments (TPU
    # pods, SLURM: found from the environment); JAX_COORDINATOR_ADDRESS joins one anyway.
    c.multihost = False
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
