"""GTP v2 front end: ``gojax gtp``, a Go engine for Sabaki, Lizzie, GoGui and servers.

:class:`GTPServer` reads commands from any iterable of lines (``sys.stdin``,
``io.StringIO``) and writes replies to a text stream, following the GTP v2
specification: control characters other than tab and newline are dropped,
tabs become spaces, everything after ``#`` is a comment, empty lines are
ignored; a numeric id is echoed (``=7 ...``, ``?7 ...``); every reply ends
with a blank line. Any input line gets one well-formed reply; an
unexpected failure inside a command is answered ``? internal error: ...``.

The analysis commands (``lz-analyze``, ``kata-analyze``) answer ``=`` at once
and then stream one ``info ...`` line every interval from a background
thread until the next line arrives on the input, which ends the reply with
the blank line before that next command is read (KataGo's behaviour).
See ``docs/gtp.md`` for the command list and the output formats.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import numpy as np

from eval import gtp_params
from eval.engine import (
    RESIGN,
    RULES_FOR_KGS,
    Engine,
    EngineError,
    TimeSettings,
    rules_from_json,
    rules_json,
)
from eval.players import Analysis, keep_out, knows_ownership, model_info
from gojax import BLACK, WHITE, action_to_gtp, gtp_to_action
from gojax.games import MAX_SIZE, MIN_SIZE

NAME = "gojax"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_VERTEX = re.compile(r"^(?:pass|[A-HJ-Za-hj-z][0-9]{1,2})$", re.IGNORECASE)
_MAX_SGF_BYTES = 10_000_000
_DEFAULT_INTERVAL_CS = 100  # analysis report interval when none is given (1 s)
POLICY_LABEL_MIN = 0.005  # gojax-policy labels every move at least this probable (0.5%)


class GTPError(Exception):
    """A failed command; the message is the GTP error text."""


def preprocess(line: str) -> str:
    """GTP's input rules: drop control characters but HT/LF, HT → space, cut ``#`` comments."""
    line = _CONTROL.sub("", line).replace("\t", " ")
    return line.split("#", 1)[0].strip()


def _version() -> str:
    try:
        return importlib.metadata.version("gojax")
    except importlib.metadata.PackageNotFoundError:
        return "0"


# ----------------------------------------------------------------------------
# Argument parsing


def _colour(text: str) -> int:
    lower = text.lower()
    if lower in ("b", "black"):
        return BLACK
    if lower in ("w", "white"):
        return WHITE
    raise GTPError("syntax error")


def _int(text: str, low: int | None = None) -> int:
    if not re.fullmatch(r"[+-]?[0-9]{1,9}", text):
        raise GTPError("syntax error")
    value = int(text)
    if low is not None and value < low:
        raise GTPError("syntax error")
    return value


def _float(text: str, low: float | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise GTPError("syntax error") from None
    if not math.isfinite(value) or (low is not None and value < low):
        raise GTPError("syntax error")
    return value


def _kgs_time_settings(args: list[str]) -> TimeSettings:
    """``kgs-time_settings``' arguments: ``none``, ``absolute MAIN``, ``canadian MAIN BYO
    STONES`` or ``byoyomi MAIN BYO PERIODS`` (GTPError "syntax error" otherwise)."""
    if not args:
        raise GTPError("syntax error")
    kind, rest = args[0].lower(), args[1:]
    if kind == "none" and not rest:
        settings = TimeSettings()
    elif kind == "absolute" and len(rest) == 1:
        settings = TimeSettings("absolute", _float(rest[0], 0))
    elif kind == "canadian" and len(rest) == 3:
        main, byo, stones = _float(rest[0], 0), _float(rest[1], 0), _int(rest[2], 0)
        if byo <= 0 or stones < 1:
            raise GTPError("syntax error")
        settings = TimeSettings("canadian", main, byo, period_stones=stones)
    elif kind == "byoyomi" and len(rest) == 3:
        main, byo, periods = _float(rest[0], 0), _float(rest[1], 0), _int(rest[2], 0)
        if periods == 0 or byo <= 0:
            settings = TimeSettings("absolute", main)
        else:
            settings = TimeSettings("byoyomi", main, byo, periods=periods)
    else:
        raise GTPError("syntax error")
    return settings


def _args(args: list[str], count: int) -> list[str]:
    if len(args) != count:
        raise GTPError("syntax error")
    return args


# ``kata-analyze``'s true/false keys (KataGo's names) and the options they set.
_SWITCHES = {
    "ownership": "ownership",
    "ownershipStdev": "ownership_stdev",
    "movesOwnership": "moves_ownership",
    "movesOwnershipStdev": "moves_ownership_stdev",
    "rootInfo": "root_info",
    "pvVisits": "pv_visits",
    "pvEdgeVisits": "pv_edge_visits",
    "noResultValue": "no_result_value",
}


class AnalyzeOptions:
    """Arguments of ``lz-analyze``/``kata-analyze`` and their genmove forms."""

    def __init__(self) -> None:
        self.colour: int | None = None
        self.interval: float = _DEFAULT_INTERVAL_CS / 100  # seconds
        self.ownership = False
        self.root_info = False
        self.pv_visits = False
        self.pv_edge_visits = False
        self.ownership_stdev = False
        self.moves_ownership = False
        self.moves_ownership_stdev = False
        self.no_result_value = False
        self.min_moves = 0
        self.max_moves = 1_000_000
        self.avoid: np.ndarray | None = None  # [2, A] plies, as gojax.search.search's
        # Sabaki's ``analyze``: KataGo's numbers always with a decimal point (C++'s showpoint)
        self.showpoint = False

    @classmethod
    def parse(cls, args: list[str], size: int, *, sabaki: bool = False) -> AnalyzeOptions:
        """``[colour] [interval] {key value}``; the interval is in centiseconds.

        ``avoid COLOUR VERTEX,VERTEX,... DEPTH`` (any number) keeps those moves
        of that player out of the search in the first ``DEPTH`` plies; ``allow``
        (once, not with ``avoid``) keeps every other move out. ``sabaki``: the
        options of KataGo's ``analyze`` and ``genmove_analyze`` (no ownership, root
        or PV-visit switches, as there) and numbers printed with a decimal point.
        """
        opts = cls()
        opts.showpoint = sabaki
        rest = list(args)
        if rest and rest[0].lower() in ("b", "w", "black", "white"):
            opts.colour = _colour(rest.pop(0))
        if rest and re.fullmatch(r"[0-9]+", rest[0]):
            opts.interval = _int(rest.pop(0), 0) / 100
        kinds = []
        while rest:
            key = rest.pop(0)
            if key in ("allow", "avoid"):
                if len(rest) < 3 or (kinds and (key == "allow" or "allow" in kinds)):
                    raise GTPError("syntax error")
                colour, vertices, depth = rest[:3]
                del rest[:3]
                kinds.append(key)
                opts._keep_out(key, _colour(colour), vertices, _int(depth, 1), size)
                continue
            if not rest:
                raise GTPError("syntax error")
            value = rest.pop(0)
            if key == "interval":
                opts.interval = _int(value, 0) / 100
            elif key in _SWITCHES and not sabaki:
                if value not in ("true", "false"):
                    raise GTPError("syntax error")
                setattr(opts, _SWITCHES[key], value == "true")
            elif key == "minmoves":
                opts.min_moves = _int(value, 0)
            elif key == "maxmoves":
                opts.max_moves = _int(value, 0)
            else:
                raise GTPError("syntax error")
        return opts

    def _keep_out(self, kind: str, colour: int, vertices: str, depth: int, size: int) -> None:
        if self.avoid is None:
            self.avoid = np.zeros((2, size * size + 1), np.int32)
        try:
            actions = [gtp_to_action(v, size) for v in vertices.split(",") if v]
        except ValueError:
            raise GTPError("syntax error") from None
        keep_out(self.avoid, colour, actions, depth, allow=kind == "allow")


def _fmt(x: float) -> str:
    """A number as KataGo's C++ streams print it: 6 significant digits, no trailing zeros."""
    return f"{x:.6g}" if math.isfinite(x) else "0"


def _fmt_point(x: float) -> str:
    """The same with C++'s ``showpoint`` (KataGo's ``analyze`` for Sabaki): trailing zeros
    kept, so that every number has a decimal point (0.5 is ``0.500000``, 12 ``12.0000``)."""
    return f"{x:#.6g}" if math.isfinite(x) else "0.00000"


def format_analysis(analysis: Analysis, size: int, *, kata: bool, opts: AnalyzeOptions) -> str:
    """One analysis report line in Leela Zero's (``lz``) or KataGo's (``kata``) format.

    ``lz``: win rate, prior and lcb as integers in 0..10000. ``kata``: floats,
    scores in points, KataGo's fields in its order; what the options ask for
    (``pvVisits``, ``pvEdgeVisits``, ``noResultValue``, ``movesOwnership``,
    ``movesOwnershipStdev``, ``rootInfo``, ``ownership``, ``ownershipStdev``).
    Boards are ``[P]`` values, row-major from the top left. All from the mover's
    view. Every visit weighs the same in gojax's searches: a move's ``weight`` is
    its visits, and without graph search its ``edgeVisits`` and ``pvEdgeVisits``
    are its visits and ``pvVisits``. With ``opts.showpoint`` (Sabaki's ``analyze``) the
    numbers keep their trailing zeros, as KataGo prints them there.
    """
    fmt = _fmt_point if opts.showpoint else _fmt
    listed = analysis.moves[: max(opts.max_moves, 1)]
    per_move = opts.moves_ownership or opts.moves_ownership_stdev
    if kata and per_move and analysis.moves_ownership is not None:
        moves_means, moves_stdevs = analysis.moves_ownership()
    else:  # one evaluation: no subtree below any move, so nothing to print
        per_move = False
    parts = []
    for k, info in enumerate(listed):
        vertex = action_to_gtp(info.action, size)
        pv = " ".join(action_to_gtp(a, size) for a in info.pv)
        if not kata:
            parts.append(
                f"info move {vertex} visits {info.visits} "
                f"winrate {_per10000(info.winrate)} prior {_per10000(info.prior)} "
                f"lcb {_per10000(info.lcb)} order {info.order} pv {pv}"
            )
            continue
        fields = [
            f"info move {vertex} visits {info.visits} edgeVisits {info.visits}",
            f"utility {fmt(info.utility)} winrate {fmt(info.winrate)}",
            f"scoreMean {fmt(info.score_lead)} scoreStdev {fmt(info.score_stdev)}",
            f"scoreLead {fmt(info.score_lead)} scoreSelfplay {fmt(info.score_selfplay)}",
        ]
        if opts.no_result_value:
            fields.append(f"noResultValue {fmt(info.no_result)}")
        fields += [
            f"prior {fmt(info.prior)} lcb {fmt(info.lcb)} utilityLcb {fmt(info.utility_lcb)}",
            f"weight {fmt(float(info.visits))}",
        ]
        if info.symmetry_of is not None:
            fields.append(f"isSymmetryOf {action_to_gtp(info.symmetry_of, size)}")
        fields.append(f"order {info.order} pv {pv}")
        visits_along = " ".join(map(str, info.pv_visits))
        if opts.pv_visits:
            fields.append(f"pvVisits {visits_along}")
        if opts.pv_edge_visits:
            fields.append(f"pvEdgeVisits {visits_along}")
        if per_move and opts.moves_ownership:
            fields.append("movesOwnership " + _board_values(moves_means[k], fmt))
        if per_move and opts.moves_ownership_stdev:
            fields.append("movesOwnershipStdev " + _board_values(moves_stdevs[k], fmt))
        parts.append(" ".join(fields))
    if kata and opts.root_info:
        lead = fmt(analysis.score_lead)
        parts.append(
            f"rootInfo visits {analysis.visits} utility {fmt(analysis.utility)} "
            f"winrate {fmt(analysis.winrate)} scoreMean {lead} "
            f"scoreStdev {fmt(analysis.score_stdev)} scoreLead {lead} "
            f"scoreSelfplay {fmt(analysis.score_selfplay)} weight {fmt(float(analysis.visits))}"
        )
        if analysis.raw_errors is not None:  # the root evaluation's, as KataGo adds them
            wl_error, score_error, time_left = analysis.raw_errors
            parts.append(
                f"rawStWrError {fmt(wl_error)} rawStScoreError {fmt(score_error)} "
                f"rawVarTimeLeft {fmt(time_left)}"
            )
    if kata and opts.ownership:
        parts.append("ownership " + _board_values(analysis.ownership, fmt))
    if kata and opts.ownership_stdev:
        spread = analysis.ownership_stdev
        spread = np.zeros_like(analysis.ownership) if spread is None else spread
        parts.append("ownershipStdev " + _board_values(spread, fmt))
    return " ".join(parts)


def _board_values(values: np.ndarray, fmt: Callable[[float], str] = _fmt) -> str:
    return " ".join(fmt(float(x)) for x in values)


# ``kata-raw-nn``'s single numbers: (KataGo's key, ``gojax.evaluate``'s output, format).
_RAW_NN_VALUES = (
    ("whiteWin", "white_win", "{:.6f}"),
    ("whiteLoss", "white_loss", "{:.6f}"),
    ("noResult", "no_result", "{:.6f}"),
)
_RAW_NN_SCORES = (
    ("whiteLead", "white_lead", "{:.3f}"),
    ("whiteScoreSelfplay", "white_score_selfplay", "{:.3f}"),
    ("whiteScoreSelfplaySq", "white_score_selfplay_sq", "{:.3f}"),
    ("varTimeLeft", "var_time_left", "{:.3f}"),
    ("shorttermWinlossError", "shortterm_winloss_error", "{:.3f}"),
    ("shorttermScoreError", "shortterm_score_error", "{:.3f}"),
)

# GoGui's analyze commands (``type/label/command``): heat maps and the search's line.
GOGUI_ANALYZE_COMMANDS = (
    "dboard/Ownership/gojax-ownership",
    "sboard/Policy/gojax-policy",
    "gfx/Principal variation/gojax-pv_gfx",
    "plist/Dead stones/final_status_list dead",
    "hstring/Raw network/kata-raw-nn 0",
)


def _board_rows(cells: list[str], size: int) -> str:
    """GoGui's board reply: ``size`` rows of ``size`` cells, the top line first (after an
    empty first line, which GoGui skips, as ``showboard``'s)."""
    return "\n" + "\n".join(" ".join(cells[r * size : (r + 1) * size]) for r in range(size))


# ``kata-set-rule``'s fields (KataGo's JSON rules) and the type of their values.
RULE_FIELDS = {
    "ko": str,
    "scoring": str,
    "tax": str,
    "suicide": bool,
    "hasButton": bool,
    "whiteHandicapBonus": str,
}


def format_raw_nn(
    symmetry: int, out: dict[str, np.ndarray], size: int, *, scores: bool, ownership: bool
) -> str:
    """One evaluation in ``kata-raw-nn``'s format: ``symmetry N``, then ``key value``
    lines, ``policy`` and ``whiteOwnership`` as ``size`` rows from the top line (policy
    ``NAN`` on illegal points), numbers printed as KataGo prints them.

    ``out``: one position's ``gojax.evaluate`` outputs. A net without a score head
    (``scores``) has no score lines, one that never learned ownership no ownership.
    """
    lines = [f"symmetry {symmetry}"]
    for key, name, fmt in _RAW_NN_VALUES + (_RAW_NN_SCORES if scores else ()):
        if name in out:
            lines.append(f"{key} {fmt.format(float(out[name]))}")
    policy, legal = out["policy"], out["legal"]
    cells = [f"{p:8.6f}" if ok else "     NAN" for p, ok in zip(policy, legal, strict=True)]
    lines.append("policy")
    lines += [" ".join(cells[r * size : (r + 1) * size]) for r in range(size)]
    lines.append(f"policyPass {cells[-1]}")
    if ownership:
        own = [f"{x:9.7f}" for x in out["white_ownership"]]
        lines.append("whiteOwnership")
        lines += [" ".join(own[r * size : (r + 1) * size]) for r in range(size)]
    return "\n".join(lines)


def _per10000(x: float) -> int:
    return int(round(min(max(x if math.isfinite(x) else 0.0, 0.0), 1.0) * 10000))


# ----------------------------------------------------------------------------
# The server


class _Analysis(threading.Thread):
    """Streams analysis lines until stopped; the reply's ``=`` is already written."""

    def __init__(self, server: GTPServer, opts: AnalyzeOptions, kata: bool) -> None:
        super().__init__(daemon=True, name="gtp-analysis")
        self.server = server
        self.opts = opts
        self.kata = kata
        self.stop_event = threading.Event()
        self.size = server.engine.size
        self.analyses = server.engine.ponder(opts.colour, avoid=opts.avoid)

    def run(self) -> None:
        previous = None
        next_report = time.monotonic()
        # KataGo's maxTimePondering: the search stops growing then; its analysis stays.
        grow_until = next_report + self.server.engine.max_ponder_time
        try:
            while not self.stop_event.is_set():
                if previous is None or time.monotonic() < grow_until:
                    analysis = next(self.analyses)
                if self.stop_event.is_set():
                    break
                now = time.monotonic()
                if self.opts.interval > 0 and now >= next_report:
                    line = format_analysis(analysis, self.size, kata=self.kata, opts=self.opts)
                    self.server.write(line + "\n")
                    next_report = now + max(self.opts.interval, 0.01)
                if analysis is previous or self.opts.interval <= 0:
                    # Nothing new to search for: sleep until the next report (or a stop).
                    self.stop_event.wait(max(next_report - now, 0.01))
                previous = analysis
        except Exception as err:  # a failed analysis ends the stream, never the server
            print(f"gojax gtp: analysis stopped: {err!r}", file=sys.stderr)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


class _Search(threading.Thread):
    """A search that any input line stops (KataGo's ``_cancellable`` commands):
    ``work(stop)`` runs on this thread, sees ``stop`` set when a line arrives, and
    answers as a command handler does (the server writes its reply or error)."""

    def __init__(
        self, server: GTPServer, ident: str, work: Callable[[threading.Event], str | None]
    ):
        super().__init__(daemon=True, name="gtp-search")
        self.server = server
        self.command_id = ident
        self.work = work
        self.stop_event = threading.Event()

    def run(self) -> None:
        self.server.answer(self.command_id, lambda: self.work(self.stop_event))

    def stop(self) -> None:
        """Stop the search and wait for its reply to be written."""
        self.stop_event.set()
        self.join()


class _Ponder(threading.Thread):
    """KataGo's pondering: the engine thinks on the opponent's time
    (:meth:`Engine.think_ahead`) until stopped; it writes nothing."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(daemon=True, name="gtp-ponder")
        self.engine = engine
        self.stop_event = threading.Event()

    def run(self) -> None:
        try:
            self.engine.think_ahead(self.stop_event)
        except Exception as err:  # a failed ponder costs the tree, never the server
            print(f"gojax gtp: pondering stopped: {err!r}", file=sys.stderr)

    def stop(self) -> None:
        """Stop thinking (after the part of the search running) and wait for it."""
        self.stop_event.set()
        self.join()


class GTPServer:
    """A GTP v2 session over text streams.

    Args:
      engine: the game and its player.
      out: where replies go (flushed after every write).
      name, version: what ``name`` and ``version`` answer.
    """

    def __init__(self, engine: Engine, out: TextIO, *, name: str = NAME, version: str = "") -> None:
        self.engine = engine
        self.out = out
        self.name = name
        self.version = version or _version()
        self._lock = threading.Lock()
        self._analysis: _Analysis | None = None
        self._search: _Search | None = None
        self._ponder: _Ponder | None = None
        self.commands: dict[str, Callable[[list[str], str], str | None]] = {
            "protocol_version": lambda args, _id: "2",
            "name": lambda args, _id: self.name,
            "version": lambda args, _id: self.version,
            "known_command": self.cmd_known_command,
            "list_commands": lambda args, _id: "\n".join(self.commands),
            "quit": lambda args, _id: "",
            "boardsize": self.cmd_boardsize,
            "clear_board": self.cmd_clear_board,
            "komi": self.cmd_komi,
            "get_komi": lambda args, _id: _fmt(self.engine.komi),
            "play": self.cmd_play,
            "genmove": self.cmd_genmove,
            "undo": self.cmd_undo,
            "showboard": self.cmd_showboard,
            "final_score": lambda args, _id: self.engine.final_score(),
            "final_status_list": self.cmd_final_status_list,
            "loadsgf": self.cmd_loadsgf,
            "printsgf": self.cmd_printsgf,
            "fixed_handicap": self.cmd_fixed_handicap,
            "place_free_handicap": self.cmd_place_free_handicap,
            "set_free_handicap": self.cmd_set_free_handicap,
            "time_settings": self.cmd_time_settings,
            "time_left": self.cmd_time_left,
            "kgs-time_settings": self.cmd_kgs_time_settings,
            "kata-time_settings": self.cmd_kata_time_settings,
            "kata-list_time_settings": self.cmd_kata_list_time_settings,
            "kgs-genmove_cleanup": self.cmd_kgs_genmove_cleanup,
            "set_position": self.cmd_set_position,
            "kgs-rules": self.cmd_kgs_rules,
            "kata-set-rules": self.cmd_kata_set_rules,
            "kata-set-rule": self.cmd_kata_set_rule,
            "kata-get-rules": lambda args, _id: json.dumps(
                rules_json(self.engine.rules), separators=(",", ":")
            ),
            "lz-analyze": self.cmd_lz_analyze,
            "kata-list-params": lambda args, _id: " ".join(gtp_params.names(self.engine)),
            "kata-get-param": self.cmd_kata_get_param,
            "kata-get-params": lambda args, _id: gtp_params.dump(gtp_params.values(self.engine)),
            "kata-set-param": self.cmd_kata_set_param,
            "kata-set-params": self.cmd_kata_set_params,
            "kata-analyze": self.cmd_kata_analyze,
            "analyze": self.cmd_analyze,
            "lz-genmove_analyze": self.cmd_lz_genmove_analyze,
            "kata-genmove_analyze": self.cmd_kata_genmove_analyze,
            "genmove_analyze": self.cmd_genmove_analyze,
            "kata-search": self.cmd_kata_search,
            "kata-search_analyze": self.cmd_kata_search_analyze,
            "kata-search_cancellable": self.cmd_kata_search_cancellable,
            "kata-search_analyze_cancellable": self.cmd_kata_search_analyze_cancellable,
            "kata-get-models": self.cmd_kata_get_models,
            "kata-raw-nn": self.cmd_kata_raw_nn,
            "gogui-analyze_commands": lambda args, _id: "\n".join(GOGUI_ANALYZE_COMMANDS),
            "gojax-ownership": self.cmd_gojax_ownership,
            "gojax-policy": self.cmd_gojax_policy,
            "gojax-pv_gfx": self.cmd_gojax_pv_gfx,
            "cputime": lambda args, _id: f"{self.engine.genmove_seconds:.3f}",
            "gomill-cpu_time": lambda args, _id: f"{self.engine.genmove_seconds:.3f}",
            "stop": lambda args, _id: "",
            "clear_cache": self.cmd_clear_cache,
        }

    # -- the loop -------------------------------------------------------------

    def write(self, text: str) -> None:
        with self._lock:
            self.out.write(text)
            self.out.flush()

    def serve(self, lines: Iterable[str]) -> None:
        """Answer every line of ``lines`` until ``quit`` or the end of the input."""
        try:
            for raw in lines:
                # Any input ends a running analysis, cancellable search or pondering, a
                # blank line included (KataGo).
                self._stop_pondering()
                self._stop_analysis()
                self._stop_search()
                if not self.handle(raw):
                    break
                self._start_pondering()
        finally:
            self._stop_pondering()
            self._stop_analysis()
            self._stop_search()

    def serve_stream(self, stream: TextIO) -> None:
        """Like :meth:`serve`, reading ``stream`` line by line as it arrives."""
        self.serve(iter(stream.readline, ""))

    def _stop_analysis(self) -> None:
        if self._analysis is not None:
            self._analysis.stop()
            self._analysis = None
            self.write("\n")  # the blank line that ends the analysis reply

    def _stop_search(self) -> None:
        if self._search is not None:
            self._search.stop()  # its reply is written before the next command's
            self._search = None

    def _stop_pondering(self) -> None:
        if self._ponder is not None:
            self._ponder.stop()
            self._ponder = None

    def _start_pondering(self) -> None:
        """With ``ponderingEnabled``, think until the next line, unless a command's own
        search or analysis is running (as KataGo: after every command, once the game
        has moves; the engine keeps the tree between them)."""
        if self.engine.pondering and self._analysis is None and self._search is None:
            self._ponder = _Ponder(self.engine)
            self._ponder.start()

    def _start_search(self, ident: str, work: Callable[[threading.Event], str | None]) -> None:
        """Answer with ``work(stop)`` on a thread that the next input line stops."""
        self._search = _Search(self, ident, work)
        self._search.start()

    def handle(self, raw: str) -> bool:
        """Answer one input line; ``False`` after ``quit``."""
        line = preprocess(raw)
        if not line:
            return True
        words = line.split()
        ident = ""
        if words[0].isdigit() and words[0].isascii():
            ident = str(int(words[0]))
            words = words[1:]
        if not words:
            self.write(f"?{ident} unknown command\n\n")
            return True
        command, args = words[0], words[1:]
        handler = self.commands.get(command)
        if handler is None:
            self.write(f"?{ident} unknown command\n\n")
            return True
        self.answer(ident, lambda: handler(args, ident))
        return command != "quit"

    def answer(self, ident: str, call: Callable[[], str | None]) -> None:
        """Write the reply to a command: ``call()``'s result, or the error it raised
        (None: the command wrote, or is writing, its own reply)."""
        try:
            result = call()
        except GTPError as err:
            self.write(f"?{ident} {err}\n\n")
            return
        except EngineError as err:
            self.write(f"?{ident} {_one_line(str(err))}\n\n")
            return
        except Exception as err:  # never die on a command: report and carry on
            self.write(f"?{ident} internal error: {_one_line(repr(err))}\n\n")
            return
        if result is not None:
            self.write(_reply(ident, result))

    # -- commands -------------------------------------------------------------

    def cmd_known_command(self, args, _id):
        _args(args, 1)
        return "true" if args[0] in self.commands else "false"

    def cmd_boardsize(self, args, _id):
        size = _int(_args(args, 1)[0])
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise GTPError("unacceptable size")
        self.engine.set_size(size)
        return ""

    def cmd_clear_board(self, args, _id):
        _args(args, 0)
        self.engine.clear()
        return ""

    def cmd_komi(self, args, _id):
        komi = _float(_args(args, 1)[0])
        if abs(komi) > 2 * self.engine.size**2:
            raise GTPError("syntax error")
        self.engine.set_komi(komi)
        return ""

    def _vertex(self, text: str) -> int:
        if not _VERTEX.match(text):
            raise GTPError("syntax error")
        try:
            return gtp_to_action(text, self.engine.size)
        except ValueError:
            raise GTPError("illegal move") from None

    def cmd_play(self, args, _id):
        colour_text, vertex = _args(args, 2)
        colour = _colour(colour_text)
        self.engine.play(colour, self._vertex(vertex))
        return ""

    def cmd_genmove(self, args, _id):
        colour = _colour(_args(args, 1)[0])
        action, _ = self.engine.genmove(colour)
        return "resign" if action == RESIGN else action_to_gtp(action, self.engine.size)

    def cmd_kata_search(self, args, _id):
        # genmove without the move: the controller plays it (or not) with ``play``.
        colour = _colour(_args(args, 1)[0])
        action, _ = self.engine.genmove(colour, play=False)
        return "resign" if action == RESIGN else action_to_gtp(action, self.engine.size)

    def cmd_kata_search_cancellable(self, args, ident):
        # kata-search that the next input line (a blank one too) ends with the move so far.
        colour = _colour(_args(args, 1)[0])

        def work(stop: threading.Event) -> str:
            action, _ = self.engine.genmove(colour, play=False, stop=stop)
            return "resign" if action == RESIGN else action_to_gtp(action, self.engine.size)

        self._start_search(ident, work)
        return None

    def cmd_kata_get_models(self, args, _id):
        _args(args, 0)
        model = self.engine.network()
        if model is None:
            return "[]"  # KataGo's answer without a network
        return json.dumps([model_info(model, max_batch_size=1)], separators=(",", ":"))

    def cmd_kgs_genmove_cleanup(self, args, _id):
        # KGS's cleanup phase: no pass while a dead opponent stone is on the board.
        colour = _colour(_args(args, 1)[0])
        action, _ = self.engine.genmove(colour, cleanup=True)
        return action_to_gtp(action, self.engine.size)

    def cmd_undo(self, args, _id):
        _args(args, 0)
        self.engine.undo()
        return ""

    def cmd_showboard(self, args, _id):
        from gojax import render

        _args(args, 0)
        return "\n" + render.state_to_text(self.engine.state)

    def cmd_final_status_list(self, args, _id):
        status = _args(args, 1)[0]
        if status not in ("alive", "dead", "seki"):
            raise GTPError("syntax error")
        points = self.engine.final_status(status)
        # GTP's vertex*** form: one string (chain) per line.
        chains: dict[int, list[str]] = {}
        labels = self.engine.state.chain.tolist()
        for point in points:
            chains.setdefault(labels[point], []).append(action_to_gtp(point, self.engine.size))
        return "\n".join(" ".join(chain) for chain in chains.values())

    def cmd_loadsgf(self, args, _id):
        from gojax import sgf

        if len(args) not in (1, 2):
            raise GTPError("syntax error")
        move_number = _int(args[1], 1) if len(args) == 2 else None
        path = args[0]
        # Only ordinary files of sane size: a FIFO or a device would hang the engine.
        if not os.path.isfile(path) or os.path.getsize(path) > _MAX_SGF_BYTES:
            raise GTPError("cannot load file")
        try:
            record = sgf.load(path)
        except (OSError, ValueError) as err:
            raise GTPError(f"cannot load file: {_one_line(str(err))}") from None
        try:
            self.engine.load_record(record, move_number)
        except EngineError as err:
            raise GTPError(f"cannot load file: {err}") from None
        return ""

    def cmd_printsgf(self, args, _id):
        from gojax import sgf

        if len(args) > 1:
            raise GTPError("syntax error")
        if args:
            try:
                sgf.save(self.engine.to_record(), args[0])
            except (OSError, ValueError) as err:
                raise GTPError(f"cannot save file: {_one_line(str(err))}") from None
            return ""
        return self.engine.to_sgf().strip()

    def cmd_fixed_handicap(self, args, _id):
        stones = _int(_args(args, 1)[0])
        points = self.engine.fixed_handicap(stones)
        return " ".join(action_to_gtp(p, self.engine.size) for p in points)

    def cmd_place_free_handicap(self, args, _id):
        stones = _int(_args(args, 1)[0])
        points = self.engine.place_free_handicap(stones)
        return " ".join(action_to_gtp(p, self.engine.size) for p in points)

    def cmd_set_free_handicap(self, args, _id):
        if not args:
            raise GTPError("syntax error")
        points = []
        for text in args:
            point = self._vertex(text)
            if point == self.engine.size**2:
                raise GTPError("bad vertex list")
            points.append(point)
        self.engine.set_free_handicap(points)
        return ""

    def cmd_set_position(self, args, _id):
        if len(args) % 2:
            raise GTPError("syntax error")
        stones = []
        for colour, vertex in zip(args[::2], args[1::2], strict=True):
            point = self._vertex(vertex)
            if point == self.engine.size**2:
                raise GTPError("syntax error")
            stones.append((_colour(colour), point))
        self.engine.set_position(stones)
        return ""

    def cmd_time_settings(self, args, _id):
        main, byo, stones = _args(args, 3)
        settings = TimeSettings.from_gtp(_float(main, 0), _float(byo, 0), _int(stones, 0))
        self.engine.set_time(settings)
        return ""

    def cmd_kgs_time_settings(self, args, _id):
        self.engine.set_time(_kgs_time_settings(args))
        return ""

    def cmd_kata_time_settings(self, args, _id):
        # KataGo's superset of kgs-time_settings: Fischer increments, with or without caps.
        kind, rest = (args[0].lower(), args[1:]) if args else ("", [])
        if kind == "fischer" and len(rest) == 2:
            settings = TimeSettings("fischer", _float(rest[0], 0), increment=_float(rest[1], 0))
        elif kind == "fischer-capped" and len(rest) == 4:
            main, increment = _float(rest[0], 0), _float(rest[1], 0)
            # A negative limit means none.
            limit, per_move = (_float(x) for x in rest[2:])
            limit = math.inf if limit < 0 else limit
            per_move = math.inf if per_move < 0 else per_move
            if limit < main:
                raise GTPError("syntax error")
            settings = TimeSettings(
                "fischer", main, increment=increment, main_limit=limit, max_per_move=per_move
            )
        else:
            settings = _kgs_time_settings(args)
        self.engine.set_time(settings)
        return ""

    def cmd_kata_list_time_settings(self, args, _id):
        _args(args, 0)
        return "none absolute byoyomi canadian fischer fischer-capped"

    def cmd_time_left(self, args, _id):
        colour, seconds, stones = _args(args, 3)
        self.engine.time_left(_colour(colour), _float(seconds), _int(stones, 0))
        return ""

    def cmd_kgs_rules(self, args, _id):
        name = _args(args, 1)[0].lower()
        if name not in RULES_FOR_KGS:
            raise GTPError("rules not supported")  # japanese: territory scoring
        self.engine.set_rules(RULES_FOR_KGS[name])
        return ""

    def cmd_kata_set_rules(self, args, _id):
        if not args:
            raise GTPError("syntax error")
        text = " ".join(args)
        if text.startswith("{"):
            try:
                fields = json.loads(text)
            except ValueError:
                raise GTPError("syntax error") from None
            if not isinstance(fields, dict):
                raise GTPError("syntax error")
            name = rules_from_json(fields)
        else:
            from gojax import get_rules

            try:
                name = get_rules(text).name
            except ValueError:
                raise GTPError("rules not supported") from None
        self.engine.set_rules(name)
        return ""

    def cmd_kata_set_rule(self, args, _id):
        key, value = _args(args, 2)
        if key not in RULE_FIELDS:
            raise GTPError(f"unknown rules field {key!r}: one of {', '.join(RULE_FIELDS)}")
        if RULE_FIELDS[key] is bool:
            if value.lower() not in ("true", "false"):
                raise GTPError(f"{key} is true or false, not {value!r}")
            parsed: str | bool = value.lower() == "true"
        else:
            parsed = value.upper()
        # The other fields stay as they are; the result must be one of the presets.
        self.engine.set_rules(rules_from_json(rules_json(self.engine.rules) | {key: parsed}))
        return ""

    def cmd_kata_get_param(self, args, _id):
        if len(args) != 1:
            raise GTPError(f"Expected one argument for kata-get-param but got '{' '.join(args)}'")
        try:
            return gtp_params.dump(gtp_params.value(self.engine, args[0]))
        except gtp_params.ParamError as error:
            raise GTPError(str(error)) from None

    def cmd_kata_set_param(self, args, _id):
        if len(args) not in (1, 2):
            raise GTPError(
                f"Expected one or two arguments for kata-set-param but got '{' '.join(args)}'"
            )
        return self._set_params({args[0]: args[1] if len(args) == 2 else ""})

    def cmd_kata_set_params(self, args, _id):
        try:
            settings = gtp_params.settings_from_json(" ".join(args))
        except gtp_params.ParamError as error:
            raise GTPError(str(error)) from None
        return self._set_params(settings)

    def _set_params(self, settings: dict[str, str]) -> str:
        try:
            gtp_params.set_params(self.engine, settings)
        except gtp_params.ParamError as error:
            raise GTPError(str(error)) from None
        return ""

    def cmd_kata_raw_nn(self, args, _id):
        from gojax.evaluate import has_score_head

        which = _args(args, 1)[0].lower()
        if which == "all":
            symmetries = list(range(8))
        elif which in {str(s) for s in range(8)}:
            symmetries = [int(which)]
        else:
            raise GTPError("syntax error")  # KataGo's: 'all' or a symmetry 0..7
        outputs = self.engine.raw_nn(symmetries)
        model = self.engine.player.model
        return "\n".join(
            format_raw_nn(
                s,
                out,
                self.engine.size,
                scores=has_score_head(model.output_spec),
                ownership=knows_ownership(model),
            )
            for s, out in zip(symmetries, outputs, strict=True)
        )

    def _evaluation(self) -> tuple[Analysis, int]:
        """The player's evaluation of the position to play, and who is to play."""
        return self.engine.evaluate(), self.engine.to_play

    def cmd_gojax_ownership(self, args, _id):
        _args(args, 0)
        if not self.engine.player.has_ownership:
            raise GTPError("this player has no ownership")
        analysis, colour = self._evaluation()
        black = analysis.ownership * colour  # GoGui: black positive
        return _board_rows([f"{x:.3f}" for x in black], self.engine.size)

    def cmd_gojax_policy(self, args, _id):
        _args(args, 0)
        analysis, _ = self._evaluation()
        size = self.engine.size
        # Every move's probability: ``analysis.moves`` lists only the likeliest few.
        policy = analysis.policy
        if policy is None:
            policy = np.zeros(size * size + 1)
            for info in analysis.moves:
                policy[info.action] = info.prior
        cells = ['""'] * (size * size)  # GoGui's empty label
        for point in np.flatnonzero(policy[: size * size] >= POLICY_LABEL_MIN):
            # Halves round up, so that no labelled move reads 0 (round() takes 0.5 to 0).
            cells[point] = str(math.floor(100 * float(policy[point]) + 0.5))
        return _board_rows(cells, size)

    def cmd_gojax_pv_gfx(self, args, _id):
        _args(args, 0)
        colour = self.engine.to_play
        analysis = self.engine.analyze()
        size = self.engine.size
        names = {BLACK: "b", WHITE: "w"}
        line = [
            f"{names[colour * (-1) ** i]} {action_to_gtp(a, size).upper()}"
            for i, a in enumerate(analysis.best.pv)
        ]
        labels = [
            f"{action_to_gtp(info.action, size)} {round(100 * info.winrate)}"
            for info in analysis.moves[:10]
            if info.visits > 0 and info.action < size * size
        ]
        mover = "Black" if colour == BLACK else "White"
        text = (
            f"{mover} to play: win rate {100 * analysis.winrate:.1f}%, "
            f"lead {analysis.score_lead:+.1f}, {analysis.visits} visits, "
            f"best {action_to_gtp(analysis.best.action, size)}"
        )
        return "\n".join(
            ["VAR " + " ".join(line)]
            + (["LABEL " + " ".join(labels)] if labels else [])
            + ["TEXT " + text]
        )

    def cmd_clear_cache(self, args, _id):
        self.engine.player.new_game()
        return ""

    def _start_analysis(self, args, ident, *, kata: bool, sabaki: bool = False):
        opts = AnalyzeOptions.parse(args, self.engine.size, sabaki=sabaki)
        analysis = _Analysis(self, opts, kata)  # may fail (bad position): before the "="
        self.write(f"={ident}\n")
        self._analysis = analysis
        analysis.start()
        return None

    def cmd_lz_analyze(self, args, ident):
        return self._start_analysis(args, ident, kata=False)

    def cmd_kata_analyze(self, args, ident):
        return self._start_analysis(args, ident, kata=True)

    def cmd_analyze(self, args, ident):
        """KataGo's ``analyze`` (Sabaki's): ``kata-analyze``'s lines, numbers with a decimal
        point, without the options only ``kata-analyze`` has."""
        return self._start_analysis(args, ident, kata=True, sabaki=True)

    def _genmove_analyze(
        self, opts: AnalyzeOptions, ident, *, kata: bool, play: bool = True, stop=None
    ):
        colour = self.engine.to_play if opts.colour is None else opts.colour
        size = self.engine.size
        lines: list[str] = []
        last = [-math.inf]

        def progress(analysis: Analysis) -> None:
            now = time.monotonic()
            if opts.interval > 0 and now - last[0] >= opts.interval:
                last[0] = now
                lines.append(format_analysis(analysis, size, kata=kata, opts=opts))

        # A failure here is reported as an ordinary error: nothing was written yet.
        action, analysis = self.engine.genmove(
            colour, progress=progress, avoid=opts.avoid, play=play, stop=stop
        )
        final = format_analysis(analysis, size, kata=kata, opts=opts)
        if not lines or lines[-1] != final:
            lines.append(final)
        move = "resign" if action == RESIGN else action_to_gtp(action, size)
        self.write(f"={ident}\n" + "".join(line + "\n" for line in lines) + f"play {move}\n\n")
        return None

    def cmd_lz_genmove_analyze(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)
        return self._genmove_analyze(opts, ident, kata=False)

    def cmd_kata_genmove_analyze(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)
        return self._genmove_analyze(opts, ident, kata=True)

    def cmd_genmove_analyze(self, args, ident):
        """``kata-genmove_analyze`` in ``analyze``'s form (see :meth:`cmd_analyze`)."""
        opts = AnalyzeOptions.parse(args, self.engine.size, sabaki=True)
        return self._genmove_analyze(opts, ident, kata=True)

    def cmd_kata_search_analyze(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)
        return self._genmove_analyze(opts, ident, kata=True, play=False)

    def cmd_kata_search_analyze_cancellable(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)  # a bad argument: answered now
        self._start_search(
            ident, lambda stop: self._genmove_analyze(opts, ident, kata=True, play=False, stop=stop)
        )
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "error"


def _reply(ident: str, text: str) -> str:
    """``=id text`` with no empty line inside, then the blank line that ends it."""
    lines = text.split("\n")
    body = "\n".join([lines[0]] + [line for line in lines[1:] if line.strip()])
    return f"={ident} {body}\n\n" if body else f"={ident}\n\n"


# ----------------------------------------------------------------------------
# Command line: gojax gtp


def _rollout_weights(args: argparse.Namespace):
    """The ``--rollout-policy`` file's weights, or None (uniform rollouts)."""
    if not args.rollout_policy:
        return None
    from gojax.rollout_policy import load

    return load(args.rollout_policy)


# gojax gtp's flags that a KataGo config's keys set too (eval.katago_config.gtp_options):
# a key sets one only where it was left at its default.
_KATAGO_FLAGS = ("visits", "rules", "lag", "resign_threshold")


def _katago_form(args: argparse.Namespace) -> tuple[argparse.Namespace, Any]:
    """``args`` with KataGo's command line (``-config``, ``-override-config``,
    ``-human-model``) folded in, and what of it ``eval.katago_config`` took (None
    without it): the flags it sets, the parameters to set once the engine is made."""
    from eval import katago_config

    config = getattr(args, "config", None)
    overrides = getattr(args, "katago_overrides", None)
    human = getattr(args, "human_model", None)
    if not (config or overrides or human):
        return args, None
    mapped = katago_config.gtp_options(katago_config.read_settings(config, overrides))
    defaults = getattr(args, "flag_defaults", {})
    changed = {
        flag: value
        for flag, value in mapped.options.items()
        if getattr(args, flag) == defaults.get(flag, getattr(args, flag))
    }
    if human:
        mapped.not_supported("-human-model", "no human SL model")
    return argparse.Namespace(**vars(args) | changed), mapped


def make_engine(args: argparse.Namespace) -> Engine:
    """The engine ``gojax gtp`` runs, from its parsed flags (and KataGo's command line:
    ``-config FILE -override-config ...``, ``eval.katago_config``)."""
    from eval import katago_config, players

    args, katago = _katago_form(args)

    if args.rollout_policy and args.player in ("policy", "uniform"):
        raise ValueError("--rollout-policy plays rollouts: use it with --player uct or search")

    optimism_flags = (args.root_policy_optimism, args.policy_optimism)
    if args.player in ("uniform", "uct") and any(flag is not None for flag in optimism_flags):
        raise ValueError(f"--player {args.player} has no network: policy optimism needs one")
    if args.player == "uniform":
        player = players.UniformPlayer()
    elif args.player == "uct":
        player = players.UCTPlayer(
            visits=args.visits,
            rollout_weights=_rollout_weights(args),
            ponder_visits=args.ponder_visits,
        )
    else:
        if bool(args.model) == bool(args.checkpoint):
            raise ValueError(
                "give one network: --model (a KataGo .bin.gz file) or --checkpoint "
                "(a gojax train workdir)"
            )
        if args.model:
            from gojax.katago_model import load_model

            model = load_model(args.model)
        else:
            from eval.trained_model import load_trained_model

            model = load_trained_model(args.checkpoint, args.step)
        optimism = players.policy_optimism(model, *optimism_flags)
        # A gojax checkpoint plays over the move set its self-play searched.
        moves = args.moves or getattr(model, "moves", "legal")
        kind = args.player
        if kind == "auto":
            kind = "search" if args.visits > 1 else "policy"
        if kind == "search":
            symmetry = "random" if args.symmetry is None else args.symmetry
            player = players.SearchPlayer(
                model,
                symmetry=symmetry,
                optimism=optimism,
                visits=args.visits,
                search=args.search,
                gumbel_scale=args.gumbel_scale,
                considered=args.gumbel_considered,
                rollout_lambda=args.rollout_lambda,
                rollouts=args.rollouts,
                rollout_weights=_rollout_weights(args),
                lcb=args.lcb,
                score_utility=not args.no_score_utility,
                ponder_visits=args.ponder_visits,
                moves=moves,
            )
            leaf_batch = getattr(args, "leaf_batch", None) or default_leaf_batch()
            if leaf_batch > 1:  # gojax.search's virtual loss: K leaves per network call
                player.set_search(leaf_batch=leaf_batch)
        else:
            if args.rollout_policy:
                raise ValueError(
                    "--rollout-policy plays rollouts: a search (--visits > 1) needs it"
                )
            symmetry = "average" if args.symmetry is None else args.symmetry
            player = players.PolicyPlayer(
                model, symmetry=symmetry, policy_optimism=optimism[0], moves=moves
            )
    sizes = getattr(player, "board_sizes", None)
    size = args.size or (sizes[0] if sizes else 19)
    if sizes is not None and size not in sizes:
        raise ValueError(f"{player.name} plays only on {' or '.join(map(str, sizes))}x boards")
    settings = gtp_params.settings_from_text(args.override_config or "")
    later = bool(settings) or bool(katago and katago.settings)
    engine = Engine(
        player,
        size=size,
        komi=args.komi,
        rules=args.rules,
        visits=args.visits,
        resign_threshold=args.resign_threshold,
        lag=args.lag,
        seed=args.seed,
        warm=not later,
    )
    if katago is not None:  # the config's parameters this player honours; the flag's win
        settings = katago_config.gtp_parameters(katago, gtp_params.names(engine)) | settings
    if settings:
        gtp_params.set_params(engine, settings, warm=False)
    if later:  # then warmed once, as set
        engine.warm_again()
    if katago is not None:
        ignored = katago_config.ignored_line("gtp", getattr(args, "config", None), katago)
        if ignored:
            print(ignored, file=sys.stderr, flush=True)
    return engine


def default_leaf_batch() -> int:
    """``--leaf-batch``'s default: 8 on an accelerator, whose network runs far faster per
    position in batches; 1 on a CPU, the search as it was (a b6c96 net runs 1.5-1.8x
    faster per position at batch 8 there too: ``bench/one_game.py`` measures whether the
    search keeps it)."""
    import jax

    return 1 if jax.default_backend() == "cpu" else 8


def cmd_gtp(args: argparse.Namespace) -> int:
    engine = make_engine(args)
    print(f"gojax gtp: {engine.player.name}, GTP ready", file=sys.stderr, flush=True)
    GTPServer(engine, sys.stdout).serve_stream(sys.stdin)
    return 0


def register(commands) -> None:
    """Add ``gtp`` to the ``gojax`` subcommands (``commands`` from ``add_subparsers``)."""
    from eval.arguments import fraction, positive, symmetry_arg
    from gojax import RULE_PRESETS

    gtp = commands.add_parser("gtp", help="play and analyse over GTP (Sabaki, Lizzie, GoGui)")
    gtp.add_argument("--model", "-model", help="a KataGo model file (.bin.gz)")
    from eval.katago_config import add_katago_arguments

    add_katago_arguments(gtp)
    gtp.add_argument(
        "--checkpoint", help="a gojax train workdir: play its newest (or --step) network"
    )
    gtp.add_argument("--step", type=int, default=None, help="the checkpoint step (--checkpoint)")
    gtp.add_argument(
        "--player",
        choices=("auto", "policy", "search", "uct", "uniform"),
        default="auto",
        help="policy: the raw network policy; search: tree search with --visits; "
        "uct: classical UCT with --visits random playouts, no network; "
        "uniform: random moves; auto (default): search when --visits > 1, else policy",
    )
    gtp.add_argument("--visits", type=positive, default=1, help="search visits per move")
    gtp.add_argument(
        "--leaf-batch",
        type=positive,
        default=None,
        metavar="K",
        help="--player search: leaves evaluated per network call, K descents of the tree "
        "under virtual loss (SearchConfig.leaf_batch; default 1 on a CPU, 8 on a GPU or TPU)",
    )
    gtp.add_argument(
        "--ponder-visits",
        type=positive,
        default=None,
        help="--player search or uct: the root visits lz-analyze/kata-analyze grow their "
        "search to (default: 16 moves' visits, at least 256); the tree holds one node a visit",
    )
    gtp.add_argument(
        "--search",
        choices=("puct", "katago", "gumbel"),
        default="puct",
        help="the network's tree search (--player search): puct (AlphaGo Zero, default), "
        "katago (KataGo's PUCT on KataGo's utility, the value plus a score term: "
        "first-play urgency reduction, exploration that grows with visits and the "
        "utilities' spread) or gumbel (Gumbel MuZero's sequential halving over a few root "
        "moves)",
    )
    gtp.add_argument(
        "--moves",
        choices=("legal", "sensible"),
        default=None,
        help="the moves the network chooses from (--player search or policy): legal, or "
        "sensible (no filling of one's own eyes; a pass only after a pass or with nothing "
        "else to play), the set gojax's self-play recipes train over; default: a "
        "--checkpoint's own run's, legal for a --model file",
    )
    gtp.add_argument(
        "--no-score-utility",
        action="store_true",
        help="--search katago: search on the win-loss value alone, without KataGo's score utility",
    )
    gtp.add_argument(
        "--lcb",
        action="store_true",
        help="--search puct or katago: play the root move with the best lower confidence "
        "bound on its value among those with at least 15%% of the most visits (KataGo's "
        "useLcbForSelection) instead of the most visited",
    )
    gtp.add_argument(
        "--gumbel-scale",
        type=float,
        default=0.0,
        help="--search gumbel: scale of the Gumbel noise that samples the moves to search "
        "(0, default: the network's favourites, stronger in play; 1: the paper's, for "
        "self-play)",
    )
    gtp.add_argument(
        "--gumbel-considered",
        type=positive,
        default=None,
        help="--search gumbel: root moves searched by sequential halving (default: a quarter "
        "of --visits, 2 to 16); with no more visits than this, each visit goes to a "
        "different root move",
    )
    gtp.add_argument(
        "--rollout-lambda",
        type=fraction,
        default=0.0,
        help="--player search: value leaves as AlphaGo did, (1 - lambda) * network value + "
        "lambda * mean of --rollouts random games (AlphaGo: 0.5; default 0: the network alone)",
    )
    gtp.add_argument(
        "--rollouts", type=positive, default=1, help="random games per leaf (--rollout-lambda)"
    )
    gtp.add_argument(
        "--rollout-policy",
        metavar="NPZ",
        help="play the rollouts (--player uct, or --rollout-lambda) with this fast rollout "
        "policy (gojax train-rollout's rollout_policy.npz) instead of uniform random moves",
    )
    add_policy_optimism_arguments(gtp)
    gtp.add_argument("--rules", choices=sorted(RULE_PRESETS), default="tromp-taylor")
    gtp.add_argument("--komi", type=float, default=7.5)
    gtp.add_argument(
        "--size",
        type=int,
        choices=range(MIN_SIZE, MAX_SIZE + 1),
        default=None,
        metavar=f"{MIN_SIZE}..{MAX_SIZE}",
        help="initial board size (default: 19, or the size an AlphaGo Zero net was trained on)",
    )
    gtp.add_argument(
        "--override-config",
        default=None,
        metavar="NAME=VALUE,...",
        help="KataGo's parameters to start with, as kata-set-param sets them "
        "(e.g. maxVisits=200,maxTime=5,fpuReductionMax=0.1; docs/gtp.md lists them)",
    )
    gtp.add_argument(
        "--resign-threshold",
        type=float,
        default=None,
        help="resign when the win rate stays below this for 3 moves (default: never)",
    )
    gtp.add_argument(
        "--symmetry",
        type=symmetry_arg,
        default=None,
        help="0..7, random or average (default: average for policy, random for search)",
    )
    gtp.add_argument("--lag", type=float, default=1.0, help="seconds kept back per timed move")
    gtp.add_argument("--seed", type=int, default=0)
    gtp.set_defaults(
        run=cmd_gtp, flag_defaults={flag: gtp.get_default(flag) for flag in _KATAGO_FLAGS}
    )


def add_policy_optimism_arguments(parser: argparse.ArgumentParser) -> None:
    """``--root-policy-optimism`` and ``--policy-optimism`` (``gojax gtp`` and ``analysis``)."""
    from eval import players
    from eval.arguments import fraction

    parser.add_argument(
        "--root-policy-optimism",
        type=fraction,
        default=None,
        help="mix of the optimistic policy (KataGo model versions >= 12) into the root's "
        f"prior and the reported policy (default: KataGo's "
        f"{players.KATAGO_ROOT_POLICY_OPTIMISM:g} for such nets, 0 for others)",
    )
    parser.add_argument(
        "--policy-optimism",
        type=fraction,
        default=None,
        help="the same below the root (default: KataGo's "
        f"{players.KATAGO_POLICY_OPTIMISM:g} for such nets, 0 for others)",
    )
