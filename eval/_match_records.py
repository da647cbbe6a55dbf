"""What a match of :mod:`eval.match` is and how its folder records it.

:class:`MatchConfig` (what to play), :class:`GameResult` (one finished game, one line
of ``results.jsonl``) and :class:`MatchResult` (the games so far and their tallies);
the files: :func:`read_results` (damaged lines reported, left out and, on a resume,
moved aside), :func:`read_match` (a folder as it stands, for reports and recounts),
the appended and synced results line, and ``match.json``, which a rerun must match.
Apart from the games and engines because reports and recounts read match folders
without playing, and because the file formats are the contract of a resume.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import warnings
from collections.abc import Sequence
from pathlib import Path

from eval.gtp_client import split_command
from gojax import get_rules
from gojax.atomic import DamagedFileWarning, write_atomic
from train.arena import wilson_interval

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "match.json"
# Reasons a game ends. The first three are decided on the board; the rest are
# forfeits by the engine named ``loser`` in the game's result.
REASONS = ("score", "cap", "resign", "illegal", "timeout", "error", "refused")


# ---------------------------------------------------------------------------- data


@dataclasses.dataclass(frozen=True)
class MatchConfig:
    """What to play.

    ``time`` is GTP's ``time_settings`` (main seconds, byo-yomi seconds,
    byo-yomi stones); the engines are told and kept informed with
    ``time_left``, but only ``move_timeout`` is enforced (a move that takes
    longer forfeits the game).
    """

    engine_a: str | Sequence[str]
    engine_b: str | Sequence[str]
    out: str | os.PathLike
    games: int = 2
    size: int = 9
    komi: float = 7.5
    rules: str = "tromp-taylor"
    name_a: str | None = None  # default: the engine's GTP name and version
    name_b: str | None = None
    time: tuple[float, float, int] | None = None
    max_moves: int | None = None  # default 2 * size * size
    move_timeout: float = 300.0  # seconds for one genmove (first moves may compile)
    command_timeout: float = 60.0  # seconds for any other command
    start_timeout: float = 300.0  # seconds for an engine's first answer
    referee: str | Sequence[str] | None = None  # counts two-pass endings (final_score)
    # Varied openings: each pair of games (2k, 2k+1: the same opening, colours swapped)
    # starts from this many random moves away from the edge, drawn from
    # (opening_seed, k), so that deterministic engines do not repeat one game.
    openings: int = 0
    opening_seed: int = 0

    def cap(self) -> int:
        return self.max_moves if self.max_moves is not None else 2 * self.size * self.size


@dataclasses.dataclass(frozen=True)
class GameResult:
    """One finished game, as a line of ``results.jsonl``."""

    game: int  # 0-based; engine A is Black in even games
    black: str  # "A" or "B"
    black_name: str
    white_name: str
    result: str  # SGF RE: "B+3", "W+R", "B+T", "W+F", "0"
    winner: str | None  # "A", "B", or None for a draw
    reason: str  # one of REASONS
    moves: int  # moves played (passes included; an illegal move is not)
    margin: float  # Black's margin by the rules' count on the final board, komi included
    loser_move: str | None  # the illegal or refused move, as the engine gave it
    seconds: float
    sgf: str  # file name in the output folder
    # Who counted a game that ended by two passes: "board" (``margin``, the rules' count
    # of the final board) or "referee" (the referee's final_score, in ``result``).
    counted_by: str = "board"

    @property
    def white(self) -> str:
        return "B" if self.black == "A" else "A"

    @property
    def loser(self) -> str | None:
        return None if self.winner is None else ("B" if self.winner == "A" else "A")


@dataclasses.dataclass
class MatchResult:
    """Finished games (by game number) and the tallies the result table shows."""

    config: MatchConfig
    games: list[GameResult]
    names: dict[str, str]  # "A"/"B" → display name

    def wins(self, engine: str, colour: str | None = None) -> int:
        """Games ``engine`` ("A"/"B") won, as ``colour`` ("B"/"W") if given."""
        return sum(
            1
            for g in self.games
            if g.winner == engine and (colour is None or (g.black == engine) == (colour == "B"))
        )

    @property
    def draws(self) -> int:
        return sum(1 for g in self.games if g.winner is None)

    def forfeits(self, engine: str, reason: str) -> int:
        """Games ``engine`` lost by ``reason`` (illegal, timeout, error, refused)."""
        return sum(1 for g in self.games if g.loser == engine and g.reason == reason)

    @property
    def win_rate_a(self) -> float:
        n = len(self.games)
        return (self.wins("A") + 0.5 * self.draws) / n if n else float("nan")

    @property
    def interval_a(self) -> tuple[float, float]:
        """95% Wilson interval of A's win rate (a draw counts half)."""
        return wilson_interval(self.wins("A") + 0.5 * self.draws, len(self.games))

    @property
    def mean_length(self) -> float:
        return sum(g.moves for g in self.games) / len(self.games) if self.games else float("nan")


# ---------------------------------------------------------------------------- files


def read_results(folder: str | os.PathLike, *, repair: bool = False) -> dict[int, GameResult]:
    """The finished games in ``folder``'s results file, by game number.

    A line that is not a whole game result is reported (one
    ``DamagedFileWarning`` naming the file and its lines) and left out, so
    that its game is played again: the last line cut short when the process
    was killed while appending (even if its JSON is whole: no newline ends
    it), or any line damaged since (not JSON, fields missing or of the wrong
    type). The other lines are trusted. With ``repair`` the file is rewritten
    (atomically) with the trusted lines only, so that the next append starts
    on a line of its own and the damage is reported once; the lines left out
    are appended to ``results.jsonl.damaged`` beside it, for inspection.
    """
    path = Path(folder) / RESULTS_FILE
    if not path.exists():
        return {}
    lines = path.read_bytes().split(b"\n")  # the last: what follows the last newline
    results: dict[int, GameResult] = {}
    kept: list[bytes] = []
    damaged: list[tuple[int, bytes, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            if number == len(lines):
                raise ValueError("cut short")
            game = _game_result(line)
        except ValueError as err:
            damaged.append((number, line, str(err)))
            continue
        results[game.game] = game
        kept.append(line)
    if damaged:
        shown = "; ".join(f"line {n}: {why}" for n, _, why in damaged[:3])
        more = f"; {len(damaged) - 3} more" if len(damaged) > 3 else ""
        warnings.warn(
            f"{path}: {len(damaged)} line(s) not a game result, not counted (a resume plays "
            f"their games again): {shown}{more}",
            DamagedFileWarning,
            stacklevel=2,
        )
        if repair:
            with open(path.with_name(RESULTS_FILE + ".damaged"), "ab") as f:
                f.write(b"".join(line + b"\n" for _, line, _ in damaged))
            write_atomic(path, b"".join(line + b"\n" for line in kept))
    return results


def _game_result(line: bytes) -> GameResult:
    """One line of the results file as a ``GameResult``; ValueError saying why it is not."""
    try:
        entry = json.loads(line)
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
        raise ValueError(f"not JSON ({err})") from None
    if not isinstance(entry, dict):
        raise ValueError(f"a JSON {type(entry).__name__}, not an object")
    fields = {f.name: f for f in dataclasses.fields(GameResult)}
    missing = [
        name for name, f in fields.items() if name not in entry and f.default is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(f"no {', '.join(missing)}")
    for name, allowed in _RESULT_FIELDS.items():
        if name in entry and not allowed(entry[name]):
            raise ValueError(f"{name}={entry[name]!r}")
    return GameResult(**{k: v for k, v in entry.items() if k in fields})


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# What each field of a results line may hold (``_play_game`` writes them).
_RESULT_FIELDS = {
    "game": _count,
    "black": lambda v: v in ("A", "B"),
    "black_name": lambda v: isinstance(v, str),
    "white_name": lambda v: isinstance(v, str),
    "result": lambda v: isinstance(v, str),
    "winner": lambda v: v in ("A", "B", None),
    "reason": lambda v: v in REASONS,
    "moves": _count,
    "margin": _number,
    "loser_move": lambda v: v is None or isinstance(v, str),
    "seconds": _number,
    "sgf": lambda v: isinstance(v, str),
    "counted_by": lambda v: v in ("board", "referee"),
}


def read_match(folder: str | os.PathLike) -> MatchResult:
    """A match folder as it stands: its settings (``match.json``) and finished games.

    For reports on matches played earlier, possibly still running (a game cut
    short is not counted). Raises ValueError naming the file if the folder
    holds no match or a file is unreadable.
    """
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        config = MatchConfig(
            engine_a=stored["engine_a"],
            engine_b=stored["engine_b"],
            out=folder,
            size=int(stored["size"]),
            komi=float(stored["komi"]),
            rules=stored["rules"],
            max_moves=int(stored["max_moves"]),
            time=tuple(stored["time"]) if stored.get("time") else None,
            referee=stored.get("referee"),
        )
    except FileNotFoundError:
        raise ValueError(f"{folder}: not a match folder (no {MANIFEST_FILE})") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a match manifest ({err!r})") from None
    done = read_results(folder)
    games = [done[i] for i in sorted(done)]
    names = {"A": "A", "B": "B"}
    for game in games:
        names[game.black] = game.black_name
        names[game.white] = game.white_name
    return MatchResult(dataclasses.replace(config, games=max(len(games), 1)), games, names)


def _append_result(folder: Path, game: GameResult) -> None:
    line = json.dumps(dataclasses.asdict(game), sort_keys=True) + "\n"
    with open(folder / RESULTS_FILE, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _manifest(config: MatchConfig) -> dict:
    return {
        "engine_a": shlex.join(split_command(config.engine_a)),
        "engine_b": shlex.join(split_command(config.engine_b)),
        "size": config.size,
        "komi": float(config.komi),
        "rules": get_rules(config.rules).name,
        "max_moves": config.cap(),
        "time": list(config.time) if config.time else None,
        "referee": shlex.join(split_command(config.referee)) if config.referee else None,
        # Only when set: folders of matches without openings keep matching.
        **(
            {"openings": config.openings, "opening_seed": config.opening_seed}
            if config.openings
            else {}
        ),
    }


def _check_manifest(folder: Path, config: MatchConfig) -> None:
    """Write the settings on the first run; refuse to continue a different match."""
    path = folder / MANIFEST_FILE
    wanted = _manifest(config)
    if path.exists():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise ValueError(f"{path}: unreadable ({err})") from None
        keys = [k for k in {**wanted, **stored} if k != "time"]
        differ = [k for k in keys if stored.get(k) != wanted.get(k)]
        if differ:
            details = "; ".join(
                f"{k}: {stored.get(k)!r} there, {wanted.get(k)!r} now" for k in differ
            )
            raise ValueError(
                f"{folder} holds a different match ({details}); use another output folder"
            )
    else:
        write_atomic(path, json.dumps(wanted, indent=2) + "\n")
