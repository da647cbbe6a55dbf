"""Checking our rules against games recorded by another engine (KataGo's verdicts).

Two formats, one JSON object per line, both with ``size``, ``komi``,
``rules`` and ``moves`` (``[colour, GTP vertex]`` pairs):

* recorded games: ``illegal_empty`` (before each move, the empty points where
  the player to move may not play) and ``final_board`` (``size`` strings, top
  line first, ``X``/``O``/``.``);
* evaluated positions: ``katago.policy`` (``size * size`` entries, top line
  first, ``null`` where the move is illegal for the player to move), checked
  against our legal set after the moves.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from gojax._board import BLACK, WHITE, legal_moves, new_game
from gojax._coords import action_to_gtp, gtp_to_action
from gojax._counting import area
from gojax._replay import replay


@dataclasses.dataclass
class GameCheck:
    """The outcome of replaying one recorded game."""

    index: int
    game_id: str
    size: int
    rules: str
    num_moves: int
    disagreements: list[str]
    black_area: int
    white_area: int
    komi: float

    @property
    def margin(self) -> float:
        """Black's Tromp-Taylor margin with komi."""
        return self.black_area - self.white_area - self.komi


def _parse_board(rows: list[str], size: int) -> np.ndarray:
    symbols = {"X": BLACK, "O": WHITE, ".": 0}
    if len(rows) != size or any(len(row) != size for row in rows):
        raise ValueError(f"final_board is not {size} rows of {size} points")
    return np.array([symbols[ch] for row in rows for ch in row], np.int8)


def _move_cap(size: int, num_moves: int) -> int:
    # Games of one board size share a compiled replay: pad to a fixed cap.
    cap = 4 * size * size
    while cap < num_moves + 1:
        cap *= 2
    return cap


def check_game(game: dict, index: int = 0) -> GameCheck:
    """Replay one game; list every ply where our legal set or final board differs."""
    size, rules, komi = int(game["size"]), game["rules"], float(game["komi"])
    moves = game["moves"]
    cap = _move_cap(size, len(moves))
    actions = np.full(cap, size * size, np.int32)
    problems: list[str] = []
    colour = "B"
    for ply, (player, vertex) in enumerate(moves):
        if player.upper() != colour:
            problems.append(f"ply {ply}: {player} moves but {colour} is to play")
        actions[ply] = gtp_to_action(vertex, size)
        colour = "W" if colour == "B" else "B"

    state = new_game(size, komi=komi, rules=rules, max_moves=cap)
    final, boards, legal_before, was_legal = replay(
        state, jnp.asarray(actions), jnp.int32(len(moves))
    )
    legal_before = np.asarray(legal_before)
    was_legal = np.asarray(was_legal)
    boards = np.asarray(boards)
    expected_illegal = game.get("illegal_empty", [])
    for ply in range(len(moves)):
        if not was_legal[ply]:
            problems.append(f"ply {ply}: {moves[ply][0]} {moves[ply][1]} is illegal for us")
        if ply >= len(expected_illegal):
            continue
        empty = boards[ply] == 0
        ours = {action_to_gtp(a, size) for a in np.flatnonzero(empty & ~legal_before[ply, :-1])}
        theirs = set(expected_illegal[ply])
        if ours != theirs:
            extra = sorted(ours - theirs)
            missing = sorted(theirs - ours)
            problems.append(
                f"ply {ply}: illegal empty points differ: only ours {extra}, only theirs {missing}"
            )
    if "final_board" in game:
        expected = _parse_board(game["final_board"], size)
        got = np.asarray(final.board)
        if not np.array_equal(expected, got):
            diff = [action_to_gtp(int(a), size) for a in np.flatnonzero(expected != got)]
            problems.append(f"final board differs at {diff}")
    policy = game.get("katago", {}).get("policy") if isinstance(game.get("katago"), dict) else None
    if policy is not None:
        if len(policy) != size * size:
            raise ValueError(f"katago.policy has {len(policy)} entries, expected {size * size}")
        legal_after = np.asarray(legal_moves(final))[:-1]
        theirs = np.array([value is not None for value in policy])
        for point in np.flatnonzero(legal_after != theirs):
            verdict = "legal" if legal_after[point] else "illegal"
            problems.append(
                f"after the moves: {action_to_gtp(int(point), size)} is {verdict} for us, "
                f"not for the record"
            )
    black, white = (int(x) for x in np.asarray(area(final)))
    return GameCheck(
        index=index,
        game_id=str(game.get("id", index)),
        size=size,
        rules=rules,
        num_moves=len(moves),
        disagreements=problems,
        black_area=black,
        white_area=white,
        komi=komi,
    )


def read_games(path: str | Path) -> Iterable[tuple[int, dict]]:
    """Yield ``(line number, game)``; a malformed line raises ValueError naming it."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                game = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not valid JSON ({err.msg})") from None
            for field in ("size", "komi", "rules", "moves"):
                if field not in game:
                    raise ValueError(f"{path}:{number}: missing field {field!r}")
            yield number, game


def verify_rules_file(
    path: str | Path, report: Callable[[GameCheck], None] | None = None
) -> list[GameCheck]:
    """Check every game of ``path``; ``report`` is called after each game."""
    results = []
    for number, game in read_games(path):
        try:
            result = check_game(game, index=number)
        except ValueError as err:
            raise ValueError(f"{path}:{number}: {err}") from None
        results.append(result)
        if report is not None:
            report(result)
    return results
