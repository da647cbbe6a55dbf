"""One game of :mod:`eval.match`: the engines, the referee and the game loop.

:func:`_play_game` plays one game between engine A and B (:class:`_Seat`: a process
restarted after a crash or timeout), checking every move by gojax's rules before it is
relayed, forfeiting an engine that hangs, dies, plays an illegal move or refuses a
legal one, keeping each side's clock for ``time_left``, and saving the SGF; a
:class:`_Referee` engine counts two-pass endings with ``final_score``
(:func:`count_game`, also ``gojax recount``'s); :func:`opening_moves` draws a pair of
games' random opening. Apart from the match loop and its files because this is the
part that talks to engines, move by move.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from eval._match_records import GameResult, MatchConfig
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
    action_to_gtp,
    get_rules,
    gtp_to_action,
    legal_moves,
    new_game,
    play,
    score,
    sgf,
)
from gojax.games import record_from_actions, result_string

# kgs-rules knows only KGS's rule names; send it only where the match is exact
# enough (tromp-taylor has no KGS name: such engines keep their own defaults).
KGS_RULES = {
    "chinese": "chinese",
    "chinese-ogs": "chinese",
    "aga": "aga",
    "new-zealand": "new_zealand",
    "japanese": "japanese",
}


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
