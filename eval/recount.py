"""Re-count the scored games of a match with a GTP engine's own count (``final_score``).

``gojax match`` scores a game that ends by two passes by Tromp-Taylor area on
the final board: every stone counts as alive. Under rules that remove dead
stones by agreement (``chinese``, ``aga``, ``japanese``) an engine such as
KataGo passes with dead stones still on the board, and that count can give
away a game it had won. ``gojax recount FOLDER --engine CMD`` replays every
game of the match that ended by the score into ``CMD`` (the match's size,
komi and rules), asks it for ``final_score`` (its own count, dead stones
removed as it judges them), writes ``recount.jsonl`` in the folder and prints
engine A's results under both counts. Resignations, forfeits and the move
cap are kept as they are.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

from eval.gtp_client import EngineError, GTPEngine
from eval.match import MatchResult, count_game, read_match
from gojax import sgf
from gojax.atomic import write_atomic

RECOUNT_FILE = "recount.jsonl"


@dataclasses.dataclass(frozen=True)
class Recount:
    """One scored game: the match's result and the engine's count, both as SGF ``RE``."""

    game: int
    result: str  # the match's Tromp-Taylor count
    recount: str  # the engine's final_score: "B+3.5", "W+2", "0" (a draw)


def recount_match(
    folder: str | Path,
    engine: str,
    *,
    timeout: float = 120.0,
    progress: Callable[[Recount], None] | None = None,
) -> list[Recount]:
    """Every game of the match in ``folder`` that ended by the score, counted by ``engine``.

    ``progress`` is called with each game as soon as it is counted. Writes them all to
    ``recount.jsonl`` in the folder (atomically, one line a game) at the end.
    Raises ValueError for a folder that holds no match or an unreadable SGF, and
    ``EngineError`` when the engine fails or answers ``final_score`` with nonsense.
    """
    folder = Path(folder)
    match = read_match(folder)
    recounts = []
    scored = [game for game in match.games if game.reason == "score"]
    if scored:
        with GTPEngine(engine, label="recount", timeout=timeout, start_timeout=300.0) as gtp:
            for game in scored:
                record = sgf.load(folder / game.sgf)
                counted = count_game(gtp, match.config, record.moves)
                recounts.append(Recount(game.game, game.result, counted))
                if progress is not None:
                    progress(recounts[-1])
    lines = "".join(json.dumps(dataclasses.asdict(r), sort_keys=True) + "\n" for r in recounts)
    write_atomic(folder / RECOUNT_FILE, lines)
    return recounts


def read_recounts(folder: str | Path) -> list[Recount] | None:
    """The recounted games of a match folder, or None if it was never recounted; a file
    that is not a recount raises ValueError naming it."""
    path = Path(folder) / RECOUNT_FILE
    if not path.exists():
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [Recount(**json.loads(line)) for line in lines if line.strip()]
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: not a recount file ({err})") from None


def recounted(match: MatchResult, recounts: list[Recount]) -> MatchResult:
    """``match`` with each recounted game's result and winner replaced by the engine's
    count, so that its tallies (``wins``, ``win_rate_a``, ``interval_a``) are the recount's."""
    counted = {r.game: r.recount for r in recounts}
    games = []
    for game in match.games:
        if game.game in counted:
            colour = sgf.result_winner(counted[game.game])  # +1 Black, -1 White, 0 a draw
            winner = None if colour == 0 else (game.black if colour == 1 else game.white)
            game = dataclasses.replace(game, result=counted[game.game], winner=winner)
        games.append(game)
    return dataclasses.replace(match, games=games)


def win_rate_a(match: MatchResult, recounts: list[Recount]) -> tuple[float, int, int, int]:
    """Engine A's win rate (a draw counts half) and its wins, losses and draws, with the
    recounted results in place of the match's."""
    again = recounted(match, recounts)
    wins, draws = again.wins("A"), again.draws
    return again.win_rate_a, wins, len(again.games) - wins - draws, draws


def cmd_recount(args: argparse.Namespace) -> int:
    differ = 0

    def show(r: Recount) -> None:
        nonlocal differ
        changed = sgf.result_winner(r.result) != sgf.result_winner(r.recount)
        differ += changed
        mark = "  <- another winner" if changed else ""
        print(f"game {r.game + 1:4d}: match {r.result:>7}  engine {r.recount:>7}{mark}", flush=True)

    try:
        match = read_match(args.folder)
        recounts = recount_match(args.folder, args.engine, progress=show)
    except (ValueError, OSError, EngineError) as err:
        print(f"gojax recount: error: {err}", file=sys.stderr)
        return 2
    names = match.names
    before = match.win_rate_a
    rate, wins, losses, draws = win_rate_a(match, recounts)
    low, high = recounted(match, recounts).interval_a
    print(
        f"\n{len(recounts)} of {len(match.games)} games ended by the score; "
        f"the engine's count gives {differ} of them another winner"
    )
    print(f"A ({names['A']}) win rate by the match's count: {before:.1%}")
    print(
        f"A ({names['A']}) win rate by the engine's count: {rate:.1%} "
        f"({wins} won, {losses} lost, {draws} drawn; 95% Wilson {low:.1%}..{high:.1%})"
    )
    print(f"written to {Path(args.folder) / RECOUNT_FILE}")
    return 0


def register(commands) -> None:
    """Add ``gojax recount`` to the subcommands of the ``gojax`` parser."""
    recount = commands.add_parser(
        "recount",
        help="re-count a match's scored games with a GTP engine's own final_score",
        description=__doc__.split("\n\n")[1],
    )
    recount.add_argument("folder", help="a gojax match folder")
    recount.add_argument(
        "--engine", required=True, metavar="CMD", help="the GTP engine that counts"
    )
    recount.set_defaults(run=cmd_recount)
