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

The pieces live in private modules, this one is the entry point that names them and
runs the match: ``eval._match_records`` (the settings, the results and the files that
record them) and ``eval._match_games`` (the engines, the referee and one game);
here are :func:`run_match`, the result table and the ``gojax match`` command line.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from eval._match_games import _play_game, _Referee, _Seat, parse_final_score
from eval._match_games import count_game as count_game
from eval._match_games import opening_moves as opening_moves
from eval._match_records import (
    MANIFEST_FILE,
    REASONS,
    RESULTS_FILE,
    GameResult,
    MatchConfig,
    MatchResult,
    _append_result,
    _check_manifest,
    read_match,
    read_results,
)
from eval.arguments import non_negative, positive
from eval.gtp_client import EngineError, split_command
from gojax import RULE_PRESETS, get_rules
from gojax.atomic import DamagedFileWarning
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
