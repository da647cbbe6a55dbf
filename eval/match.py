"""Matches between two GTP engines: N games, checked and scored by our rules.

>>> result = run_match(MatchConfig(                                   # doctest: +SKIP
...     engine_a="gnugo --mode gtp --level 0", engine_b="gnugo --mode gtp --level 10",
...     games=20, size=9, komi=7.0, rules="chinese", out="matches/l0-vs-l10"))
>>> print(format_table(result))                                       # doctest: +SKIP

Engine A takes Black in even games (0, 2, ...) and White in odd ones. Every
move an engine generates is checked by gojax's rules before it is relayed to
the other engine: an illegal (or unreadable) move loses the game on the spot
and is never passed on. A game ends after two passes in a row, a resignation
or the move cap, and is scored by the rules' count with komi on the final
board (``gojax.score``: Tromp-Taylor area, or under ``japanese`` territory and
prisoners; stones count as alive unless inside pass-alive area, so engines
should capture dead stones before passing). With a ``referee`` (a GTP engine
such as GnuGo or KataGo) a game that ends by two passes is counted by the
referee's ``final_score`` instead, dead stones removed as it judges them: what
rules that remove dead stones by agreement (``chinese``, ``aga``, ``japanese``)
need, since engines pass there with dead stones on the board. An engine that
hangs past the move timeout or dies loses the game and is restarted for the
next one.

Files in the output folder:

* ``match.json``: the settings; a rerun must match them (``games`` may grow).
* ``results.jsonl``: one JSON object per finished game, appended and synced
  after its SGF is written, so an interrupted match resumes where it stopped.
  A line cut short or damaged is reported, never counted, and its game played
  again; a resume moves such lines to ``results.jsonl.damaged``.
* ``game-0001.sgf`` ...: every game, written atomically.
* ``engine-a.log``, ``engine-b.log``, ``referee.log``: the engines' stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from eval.arguments import non_negative, positive
from eval.gtp_client import (
    EngineDied,
    EngineError,
    EngineProtocolError,
    EngineTimeout,
    GTPCommandError,
    GTPEngine,
    split_command,
)
from gojax import (
    BLACK,
    RULE_PRESETS,
    action_to_gtp,
    get_rules,
    gtp_to_action,
    legal_moves,
    new_game,
    play,
    score,
    sgf,
)
from gojax.atomic import DamagedFileWarning, write_atomic
from gojax.games import record_from_actions, result_string
from train.arena import wilson_interval

__all__ = [
    "GameResult",
    "MatchConfig",
    "MatchResult",
    "format_table",
    "parse_final_score",
    "read_match",
    "read_results",
    "register",
    "run_match",
    "wilson_interval",
]

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "match.json"
# Reasons a game ends. The first three are decided on the board; the rest are
# forfeits by the engine named ``loser`` in the game's result.
REASONS = ("score", "cap", "resign", "illegal", "timeout", "error", "refused")
# kgs-rules knows only KGS's rule names; send it only where the match is exact
# enough (tromp-taylor has no KGS name: such engines keep their own defaults).
KGS_RULES = {
    "chinese": "chinese",
    "chinese-ogs": "chinese",
    "aga": "aga",
    "new-zealand": "new_zealand",
    "japanese": "japanese",
}


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


def opening_moves(config: MatchConfig, index: int) -> list[int]:
    """The opening of game ``index``: ``config.openings`` legal moves drawn at random
    from the points at least ``OPENING_MARGIN`` lines from the edge (fewer lines on
    boards under 7x7), the same for the two games of a pair."""
    if not config.openings:
        return []
    rng = np.random.default_rng([config.opening_seed, index // 2])
    size = config.size
    margin = max(0, min(OPENING_MARGIN, (size - 3) // 2))  # at least 3x3 points to draw from
    inner = [
        row * size + col
        for row in range(margin, size - margin)
        for col in range(margin, size - margin)
    ]
    state = new_game(size, komi=config.komi, rules=config.rules, max_moves=config.cap())
    moves: list[int] = []
    for _ in range(config.openings):
        legal = np.asarray(legal_moves(state))
        choices = [p for p in inner if legal[p]]
        if not choices:
            break
        move = int(rng.choice(choices))
        state = play(state, move)
        moves.append(move)
    return moves


# Openings keep off the first two lines (points with row and column in 2..size-3) on
# boards of 7x7 and more.
OPENING_MARGIN = 2


# ---------------------------------------------------------------------------- engines


class _Clock:
    """One side's clock under Canadian byo-yomi, for GTP ``time_left``."""

    def __init__(self, main: float, byo: float, stones: int) -> None:
        self.byo, self.stones = byo, stones
        self.main_left = main
        self.period_left = byo
        self.stones_left = stones
        self.in_byo = False

    def spend(self, seconds: float) -> None:
        if not self.in_byo:
            if seconds <= self.main_left:
                self.main_left -= seconds
                return
            seconds -= self.main_left
            self.main_left = 0.0
            if self.byo <= 0 or self.stones <= 0:
                return  # absolute time: nothing after the main time
            self.in_byo = True
        self.period_left = max(0.0, self.period_left - seconds)
        self.stones_left -= 1
        if self.stones_left <= 0:  # a new period starts
            self.period_left, self.stones_left = self.byo, self.stones

    def time_left(self) -> tuple[int, int]:
        if self.in_byo:
            return int(self.period_left), self.stones_left
        return int(self.main_left), 0


class _Seat:
    """Engine A or B: its process (restarted after a crash or timeout) and its name."""

    def __init__(
        self, key: str, config: MatchConfig, folder: Path, start: Callable | None = None
    ) -> None:
        self.key = key
        self.start = start  # makes an in-process engine instead of starting the command
        self.command = config.engine_a if key == "A" else config.engine_b
        self.config = config
        self.log = folder / f"engine-{key.lower()}.log"
        self.fixed_name = config.name_a if key == "A" else config.name_b
        self.engine: GTPEngine | None = None
        self.name = self.fixed_name or key

    def ensure(self) -> GTPEngine:
        if self.engine is not None and self.engine.alive:
            return self.engine
        if self.engine is not None:
            self.engine.close(timeout=1)
        label = f"{self.key} ({self.fixed_name or Path(split_command(self.command)[0]).name})"
        if self.start is not None:
            self.engine = self.start()
        else:
            self.engine = GTPEngine(
                self.command,
                label=label,
                log=self.log,
                timeout=self.config.command_timeout,
                start_timeout=self.config.start_timeout,
            )
        if self.fixed_name is None:
            ok, name = self.engine.request("name")
            ok_version, version = self.engine.request("version")
            name = name.strip() if ok and name.strip() else self.key
            if ok_version and version.strip():
                name = f"{name} {version.strip()}"
            self.name = name
        self.engine.known_commands()
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


def _setup(engine: GTPEngine, config: MatchConfig) -> None:
    """Tell an engine the game: size, empty board, komi, rules, time."""
    rules = get_rules(config.rules).name
    engine.send(f"boardsize {config.size}")
    engine.send("clear_board")
    engine.send(f"komi {config.komi:g}")
    if engine.knows("kata-set-rules"):
        engine.send(f"kata-set-rules {rules}")
    elif engine.knows("kgs-rules") and rules in KGS_RULES:
        engine.send(f"kgs-rules {KGS_RULES[rules]}")
    if config.time is not None:
        main, byo, stones = config.time
        engine.send(f"time_settings {main:g} {byo:g} {int(stones)}")


_FINAL_SCORE = re.compile(r"([BW])\+(\d+(?:\.\d+)?)")


def parse_final_score(text: str) -> str:
    """GTP ``final_score`` (``B+3.5``, ``W+2``, ``0``) as an SGF result; ValueError otherwise."""
    answer = text.strip()
    if answer in ("0", "Draw", "draw", "Jigo", "jigo", "B+0", "W+0"):
        return "0"
    found = _FINAL_SCORE.fullmatch(answer)
    if not found:
        raise ValueError(f"not a final_score answer: {text!r}")
    return f"{found.group(1)}+{float(found.group(2)):g}"


def count_game(engine: GTPEngine, config: MatchConfig, moves: Sequence[tuple[str, int]]) -> str:
    """``engine``'s own count (``final_score``, as an SGF result) of the game ``moves``
    (``(colour, action)`` pairs) played under ``config``'s size, komi and rules.

    Raises ``EngineError`` when the engine fails or answers with something that is not
    a score.
    """
    _setup(engine, dataclasses.replace(config, time=None))
    for colour, action in moves:
        engine.send(f"play {colour} {action_to_gtp(action, config.size)}")
    answer = engine.send("final_score")
    try:
        return parse_final_score(answer)
    except ValueError as err:
        raise EngineError(engine.label, "final_score", str(err)) from None


class _Referee:
    """The engine that counts games ended by two passes; started before the first game
    and again after a failure."""

    def __init__(self, config: MatchConfig, folder: Path) -> None:
        self.config = config
        self.log = folder / "referee.log"
        self.engine: GTPEngine | None = None

    def ensure(self) -> GTPEngine:
        if self.engine is None or not self.engine.alive:
            self.close()
            self.engine = GTPEngine(
                self.config.referee,
                label="referee",
                log=self.log,
                timeout=self.config.command_timeout,
                start_timeout=self.config.start_timeout,
            )
            self.engine.known_commands()
        return self.engine

    def count(self, actions: Sequence[int]) -> str:
        """The referee's result (SGF ``RE``) of the game ``actions`` (Black first)."""
        moves = [("b" if i % 2 == 0 else "w", a) for i, a in enumerate(actions)]
        try:
            return count_game(self.ensure(), self.config, moves)
        except EngineError:
            self.close()  # a fresh process for the next count
            raise

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


class _GameOver(Exception):
    def __init__(self, loser: int, reason: str, move: str | None = None, note: str = "") -> None:
        self.loser, self.reason, self.move, self.note = loser, reason, move, note


# ---------------------------------------------------------------------------- one game


def _play_game(
    index: int,
    seats: dict[str, _Seat],
    config: MatchConfig,
    folder: Path,
    referee: _Referee | None = None,
) -> GameResult:
    start = time.monotonic()
    size, rules = config.size, get_rules(config.rules).name
    black_key = "A" if index % 2 == 0 else "B"
    white_key = "B" if black_key == "A" else "A"
    by_colour = {1: seats[black_key], -1: seats[white_key]}
    colour_name = {1: "b", -1: "w"}
    state = new_game(size, komi=config.komi, rules=rules, max_moves=config.cap())
    actions: list[int] = []
    clocks = {c: _Clock(*config.time) for c in (1, -1)} if config.time else None
    over: _GameOver | None = None
    resigned: int | None = None

    def guarded(colour: int, action: Callable[[GTPEngine], object]):
        """Run ``action`` on the engine of ``colour``; a hang or death forfeits."""
        seat = by_colour[colour]
        try:
            return action(seat.ensure())
        except EngineTimeout as err:
            raise _GameOver(colour, "timeout", note=str(err)) from None
        except (EngineDied, EngineProtocolError) as err:
            raise _GameOver(colour, "error", note=str(err)) from None

    opening = opening_moves(config, index)
    try:
        for colour in (1, -1):
            guarded(colour, lambda e: _setup(e, config))
        for action in opening:  # both engines are told; neither chose these
            for colour in (1, -1):
                command = f"play {colour_name[int(state.to_play)]} {action_to_gtp(action, size)}"
                guarded(colour, lambda e, command=command: e.send(command))
            state = play(state, action)
            actions.append(action)
        while not bool(state.terminated):
            colour = int(state.to_play)
            other = -colour
            engine_time = clocks[colour] if clocks else None

            def generate(engine: GTPEngine, colour=colour, engine_time=engine_time) -> str:
                if engine_time is not None and engine.knows("time_left"):
                    left, stones = engine_time.time_left()
                    engine.send(f"time_left {colour_name[colour]} {left} {stones}")
                began = time.monotonic()
                command = f"genmove {colour_name[colour]}"
                ok, reply = engine.request(command, timeout=config.move_timeout)
                if not ok:  # an engine that cannot move has lost, like one that died
                    raise EngineProtocolError(engine.label, command, f"refused: {reply}")
                if engine_time is not None:
                    engine_time.spend(time.monotonic() - began)
                return reply

            reply = guarded(colour, generate).strip()
            if reply.lower() == "resign":
                resigned = colour
                break
            try:
                action = gtp_to_action(reply, size)
            except ValueError:
                raise _GameOver(colour, "illegal", reply, "an unreadable move") from None
            if not bool(legal_moves(state)[action]):
                raise _GameOver(colour, "illegal", reply, f"illegal under {rules} rules")
            state = play(state, action)
            actions.append(action)
            vertex = action_to_gtp(action, size)
            command = f"play {colour_name[colour]} {vertex}"
            try:
                guarded(other, lambda e, command=command: e.send(command))
            except GTPCommandError as err:
                # The other engine will not follow a move legal under our rules:
                # it cannot go on, and the game is its loss.
                raise _GameOver(other, "refused", vertex, str(err)) from None
    except _GameOver as ended:
        over = ended

    margin = float(score(state))
    counted_by, note = "board", ""
    if over is not None:
        loser = over.loser
        winner_colour = -loser
        mark = {"illegal": "F", "refused": "F", "error": "F", "timeout": "T"}[over.reason]
        result = f"{'B' if winner_colour == BLACK else 'W'}+{mark}"
        reason, loser_move, note = over.reason, over.move, over.note
    elif resigned is not None:
        winner_colour = -resigned
        result = f"{'B' if winner_colour == BLACK else 'W'}+R"
        reason, loser_move, note = "resign", None, ""
    else:
        result = result_string(margin)
        reason = "score" if int(state.passes) >= 2 else "cap"
        loser_move = None
        if reason == "score" and referee is not None:
            note = f"counted by the referee's final_score; the board as it stood: {result}"
            result, counted_by = referee.count(actions), "referee"
        winner_colour = sgf.result_winner(result)
    winner = None if winner_colour == 0 else (black_key if winner_colour == 1 else white_key)

    black_name, white_name = seats[black_key].name, seats[white_key].name
    name = f"game-{index + 1:04d}.sgf"
    comment = f"Black: engine {black_key} ({black_name}); White: engine {white_key}"
    comment += f" ({white_name})."
    if opening:
        comment += f" The first {len(opening)} moves are the match's opening for this pair."
    comment += f" Ended by {reason}"
    if loser_move is not None:
        comment += f" ({loser_move})"
    if note:
        comment += f": {note}"
    record = record_from_actions(
        actions,
        size=size,
        komi=config.komi,
        rules=rules,
        result=result,
        player_black=black_name,
        player_white=white_name,
        date=datetime.date.today().isoformat(),
        comment=comment + ".",
        extra={"GN": [f"game {index + 1}"], "AP": ["gojax match"]},
    )
    sgf.save(record, folder / name)
    return GameResult(
        game=index,
        black=black_key,
        black_name=black_name,
        white_name=white_name,
        result=result,
        winner=winner,
        reason=reason,
        moves=len(actions),
        margin=margin,
        loser_move=loser_move,
        seconds=round(time.monotonic() - start, 3),
        sgf=name,
        counted_by=counted_by,
    )


# ---------------------------------------------------------------------------- the match


def run_match(
    config: MatchConfig,
    *,
    progress: Callable[[GameResult, MatchResult], None] | None = None,
    engines: dict[str, Callable] | None = None,
) -> MatchResult:
    """Play the games of ``config`` not yet in its output folder; return all of them.

    ``progress(game, so_far)`` is called after each game is saved.
    ``engines`` maps a seat ("A"/"B") to a function that makes an in-process
    engine with ``GTPEngine``'s methods (``eval.arena`` plays JAX agents this
    way); that seat's command then only names it in ``match.json``. Raises
    ValueError for bad settings or an output folder holding another match,
    OSError when an engine cannot be started, and EngineError when an engine
    refuses the game's setup (board size, komi, rules, time) or a genmove, or when
    the referee fails to count a game (that game is not saved: a rerun plays it again).
    """
    if config.games < 1:
        raise ValueError(f"games must be positive, got {config.games}")
    get_rules(config.rules)  # raises ValueError naming the known presets
    if not 2 <= config.size <= 19:  # GnuGo's and most GTP engines' largest board
        raise ValueError(f"board size {config.size} is not supported in matches (2..19)")
    if config.time is not None:
        main, byo, stones = config.time
        if main < 0 or byo < 0 or stones < 0:
            raise ValueError(f"time settings must not be negative, got {config.time}")
    if config.cap() < 1:
        raise ValueError(f"max_moves must be positive, got {config.max_moves}")
    folder = Path(config.out)
    folder.mkdir(parents=True, exist_ok=True)
    _check_manifest(folder, config)
    done = read_results(folder, repair=True)
    seats = {key: _Seat(key, config, folder, (engines or {}).get(key)) for key in "AB"}
    referee = _Referee(config, folder) if config.referee else None
    names = {key: seats[key].name for key in "AB"}
    for game in done.values():  # names from the games already played
        names[game.black] = game.black_name
        names["B" if game.black == "A" else "A"] = game.white_name
    result = MatchResult(config, [done[i] for i in sorted(done) if i < config.games], dict(names))
    todo = [i for i in range(config.games) if i not in done]
    try:
        for key in "AB" if todo else "":
            seats[key].ensure()  # fail fast, before any game, if an engine cannot start
            result.names[key] = seats[key].name
        if referee is not None and todo:
            referee.ensure()
        for index in todo:
            game = _play_game(index, seats, config, folder, referee)
            _append_result(folder, game)
            result.games.append(game)
            result.games.sort(key=lambda g: g.game)
            if progress is not None:
                progress(game, result)
    finally:
        for seat in seats.values():
            seat.close()
        if referee is not None:
            referee.close()
    return result


def format_table(result: MatchResult) -> str:
    """The result table: wins by colour, forfeits, A's win rate with its 95% interval."""
    config = result.config
    rules = get_rules(config.rules)
    n = len(result.games)
    lines = [
        f"A: {result.names['A']}  ({shlex.join(split_command(config.engine_a))})",
        f"B: {result.names['B']}  ({shlex.join(split_command(config.engine_b))})",
        f"{config.size}x{config.size}, komi {config.komi:g}, {rules.name} rules, "
        + (
            "two-pass endings counted by the referee's final_score"
            if config.referee
            else f"{'territory' if rules.territory else 'Tromp-Taylor'} scoring"
        )
        + f"; {n} games",
    ]
    if config.referee:
        lines.append(f"referee: {shlex.join(split_command(config.referee))}")
    lines += [
        "",
        f"{'':<22}{'A':>8}{'B':>8}",
    ]

    def row(label: str, a: object, b: object) -> None:
        lines.append(f"{label:<22}{a!s:>8}{b!s:>8}")

    row("wins", result.wins("A"), result.wins("B"))
    row("  as Black", result.wins("A", "B"), result.wins("B", "B"))
    row("  as White", result.wins("A", "W"), result.wins("B", "W"))
    row(
        "resigned",
        *(sum(g.loser == k and g.reason == "resign" for g in result.games) for k in "AB"),
    )
    for reason, label in (
        ("illegal", "illegal moves"),
        ("timeout", "timeouts"),
        ("error", "errors"),
        ("refused", "refused legal moves"),
    ):
        row(label, result.forfeits("A", reason), result.forfeits("B", reason))
    lines.append("")
    lines.append(f"draws: {result.draws}")
    if n:
        lo, hi = result.interval_a
        lines.append(
            f"A win rate: {100 * result.win_rate_a:.1f}% "
            f"(95% Wilson interval {100 * lo:.1f}%..{100 * hi:.1f}%)"
        )
        lines.append(f"mean game length: {result.mean_length:.1f} moves")
        endings = {r: sum(g.reason == r for g in result.games) for r in REASONS}
        lines.append("ended by: " + ", ".join(f"{r} {c}" for r, c in endings.items() if c))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- command line


def _time_arg(text: str) -> tuple[float, float, int]:
    try:
        main, byo, stones = text.split(":")
        value = (float(main), float(byo), int(stones))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected MAIN:BYO:STONES (seconds, seconds, stones), got {text!r}"
        ) from None
    if min(value) < 0:
        raise argparse.ArgumentTypeError(f"time settings must not be negative, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def cmd_match(args: argparse.Namespace) -> int:
    config = MatchConfig(
        engine_a=args.engine_a,
        engine_b=args.engine_b,
        out=args.out,
        games=args.games,
        size=args.size,
        komi=args.komi,
        rules=args.rules,
        name_a=args.name_a,
        name_b=args.name_b,
        time=args.time,
        max_moves=args.max_moves,
        move_timeout=args.move_timeout,
        referee=args.referee,
        openings=args.openings,
        opening_seed=args.opening_seed,
    )
    folder = Path(config.out)
    finished = 0
    if (folder / MANIFEST_FILE).exists():
        _check_manifest(folder, config)  # a different match is an error, not a resume
        with warnings.catch_warnings():  # run_match reports damaged lines as it repairs them
            warnings.simplefilter("ignore", DamagedFileWarning)
            finished = len(read_results(folder))
    if finished:
        print(f"resuming {config.out}: {finished} games already played", flush=True)

    def progress(game: GameResult, so_far: MatchResult) -> None:
        if args.quiet:
            return
        white = "B" if game.black == "A" else "A"
        line = (
            f"game {game.game + 1}/{config.games}: {game.black} ({game.black_name}) B vs "
            f"{white} ({game.white_name}) W: {game.result} by {game.reason}"
        )
        if game.loser_move:
            line += f" ({game.loser_move})"
        line += f", {game.moves} moves, {game.seconds:.1f} s"
        line += f"  [A {so_far.wins('A')} - B {so_far.wins('B')}]"
        print(line, flush=True)

    try:
        result = run_match(config, progress=progress)
    except EngineError as err:
        print(f"gojax match: error: {err}", file=sys.stderr)
        return 2
    print()
    print(format_table(result))
    counted_on_board = any(g.reason == "score" and g.counted_by == "board" for g in result.games)
    if config.rules not in COUNTS_THE_BOARD and counted_on_board:
        print(
            f"\nnote: games that ended by two passes were counted by Tromp-Taylor area as the "
            f"board stood; under {config.rules} rules engines such as KataGo and GnuGo pass with "
            f"dead stones on the board and lose points they would keep by agreement. "
            f"--referee CMD counts them with an engine's final_score (`gojax recount "
            f"{config.out} --engine CMD` for games already played); --rules tromp-taylor makes "
            f"engines capture them first."
        )
    print(f"\nSGF files and {RESULTS_FILE} in {config.out}")
    return 0


# Rules under which engines know that the stones on the board at the end are counted as
# they stand (no dead stones removed by agreement), so the match's count is theirs.
COUNTS_THE_BOARD = ("tromp-taylor", "new-zealand")


def register(commands) -> None:
    """Add ``gojax match`` to the subcommands of the ``gojax`` parser."""
    match = commands.add_parser(
        "match", help="play games between two GTP engines, checked and scored by our rules"
    )
    match.add_argument("--engine-a", required=True, metavar="CMD", help="engine A's command line")
    match.add_argument("--engine-b", required=True, metavar="CMD", help="engine B's command line")
    match.add_argument("--games", type=positive, default=2, help="games to play (default 2)")
    match.add_argument("--size", type=int, default=9, help="board side, 2..19 (default 9)")
    match.add_argument("--komi", type=float, default=7.5)
    match.add_argument("--rules", choices=sorted(RULE_PRESETS), default="tromp-taylor")
    match.add_argument("--name-a", help="engine A's name in records (default: its GTP name)")
    match.add_argument("--name-b", help="engine B's name in records (default: its GTP name)")
    match.add_argument(
        "--time", type=_time_arg, metavar="MAIN:BYO:STONES", help="GTP time_settings, in seconds"
    )
    match.add_argument("--max-moves", type=positive, help="move cap, then score (default 2*size^2)")
    match.add_argument(
        "--move-timeout",
        type=_positive_float,
        default=300.0,
        help="seconds a genmove may take before the engine is killed and forfeits (default 300)",
    )
    match.add_argument(
        "--referee",
        metavar="CMD",
        help="a GTP engine that counts games ended by two passes with its final_score, dead "
        "stones removed (e.g. 'gnugo --mode gtp'); default: the rules' count of the board",
    )
    match.add_argument(
        "--openings",
        type=non_negative,
        default=0,
        metavar="K",
        help="start each pair of games (colours swapped) from K random moves off the first "
        "two lines, so deterministic engines do not repeat one game (default 0)",
    )
    match.add_argument(
        "--opening-seed", type=int, default=0, help="seed of the openings (default 0)"
    )
    match.add_argument("--out", required=True, help="folder for SGF files and results (resumable)")
    match.add_argument("--quiet", action="store_true", help="no line per game")
    match.set_defaults(run=cmd_match)
