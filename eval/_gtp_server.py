"""The GTP v2 session of ``gojax gtp`` (:mod:`eval.gtp`): the loop and the command table.

:class:`GTPServer` reads lines, answers each one (ids echoed, errors as ``? ...``,
every reply ending with a blank line), stops whatever a command left running (an
analysis stream, a cancellable search, pondering) when the next line arrives, and holds
the table of commands with the handlers of the game, rules, time, handicap, SGF and
parameter commands. The analysis commands' handlers come from
``eval._gtp_analysis.AnalysisCommands``, the argument parsers from ``eval._gtp_args``;
the command line that builds the engine is ``eval._gtp_cli``.
"""

from __future__ import annotations

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

from eval import gtp_params
from eval._gtp_analysis import GOGUI_ANALYZE_COMMANDS, AnalysisCommands, _Analysis
from eval._gtp_args import GTPError, _args, _colour, _float, _int, _kgs_time_settings, preprocess
from eval._gtp_format import _fmt
from eval.engine import (
    RESIGN,
    RULES_FOR_KGS,
    Engine,
    EngineError,
    TimeSettings,
    rules_from_json,
    rules_json,
)
from eval.players import model_info
from gojax import action_to_gtp, gtp_to_action
from gojax.games import MAX_SIZE, MIN_SIZE

NAME = "gojax"
_VERTEX = re.compile(r"^(?:pass|[A-HJ-Za-hj-z][0-9]{1,2})$", re.IGNORECASE)
_MAX_SGF_BYTES = 10_000_000

# ``kata-set-rule``'s fields (KataGo's JSON rules) and the type of their values.
RULE_FIELDS = {
    "ko": str,
    "scoring": str,
    "tax": str,
    "suicide": bool,
    "hasButton": bool,
    "whiteHandicapBonus": str,
}


def _version() -> str:
    try:
        return importlib.metadata.version("gojax")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def search_log_line(colour: int, move: str, visits: int, seconds: float, player: Any) -> str:
    """``gojax gtp: B D4, 64 visits in 0.31 s (206 visits/s), nn cache 45% of 5,120
    lookups``: a move's search, and the player's network cache so far if it keeps one."""
    rate = visits / seconds if seconds > 0 else 0.0
    line = f"gojax gtp: {'B' if colour == 1 else 'W'} {move}, {visits} visits in {seconds:.2f} s"
    line += f" ({rate:,.0f} visits/s)"
    stats = getattr(player, "cache_stats", lambda: None)()
    if stats and stats["lookups"]:
        share = stats["hits"] / stats["lookups"]
        line += f", nn cache {share:.0%} of {stats['lookups']:,} lookups"
    return line


def nn_cache_report(player: Any) -> dict[str, Any] | None:
    """``{"nnCacheSizePowerOfTwo", "tables", "entries", "filled", "lookups", "hits",
    "hitRate"}``: the player's network cache since it started (its tables, one per kind
    of search, summed; ``hitRate`` the share of lookups that found their position), or
    None if it keeps none."""
    stats = getattr(player, "cache_stats", lambda: None)()
    if stats is None:
        return None
    return {
        "nnCacheSizePowerOfTwo": player.nn_cache,
        "tables": stats["tables"],
        "entries": stats["size"],
        "filled": stats["filled"],
        "lookups": stats["lookups"],
        "hits": stats["hits"],
        "hitRate": round(stats["hits"] / stats["lookups"], 4) if stats["lookups"] else 0.0,
    }


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


class GTPServer(AnalysisCommands):
    """A GTP v2 session over text streams.

    Args:
      engine: the game and its player.
      out: where replies go (flushed after every write).
      name, version: what ``name`` and ``version`` answer.
      log: where a line on each ``genmove``'s search goes (its visits, visits per
        second and the network cache's hits, as KataGo logs its moves), or None.
    """

    def __init__(
        self,
        engine: Engine,
        out: TextIO,
        *,
        name: str = NAME,
        version: str = "",
        log: TextIO | None = None,
    ) -> None:
        self.engine = engine
        self.out = out
        self.log = log
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
            "gojax-nn_cache": self.cmd_gojax_nn_cache,
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
        action = self._logged_genmove(colour)
        return "resign" if action == RESIGN else action_to_gtp(action, self.engine.size)

    def cmd_kata_search(self, args, _id):
        # genmove without the move: the controller plays it (or not) with ``play``.
        colour = _colour(_args(args, 1)[0])
        action = self._logged_genmove(colour, play=False)
        return "resign" if action == RESIGN else action_to_gtp(action, self.engine.size)

    def _logged_genmove(self, colour: int, **kwargs) -> int:
        """``engine.genmove``'s move, with a line on its search in the log."""
        start = time.monotonic()
        action, analysis = self.engine.genmove(colour, **kwargs)
        if self.log is not None:
            seconds = time.monotonic() - start
            move = "resign" if action == RESIGN else action_to_gtp(action, self.engine.size)
            line = search_log_line(colour, move, analysis.visits, seconds, self.engine.player)
            print(line, file=self.log, flush=True)
        return action

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

    def cmd_clear_cache(self, args, _id):
        self.engine.player.new_game()
        return ""

    def cmd_gojax_nn_cache(self, args, _id):
        """The network cache's counters as ``kata-get-params`` writes JSON (see
        :func:`nn_cache_report`); an error for a player that keeps no cache."""
        report = nn_cache_report(self.engine.player)
        if report is None:
            raise GTPError("no network cache (--nn-cache 0, or a player without a search)")
        return gtp_params.dump(report)


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "error"


def _reply(ident: str, text: str) -> str:
    """``=id text`` with no empty line inside, then the blank line that ends it."""
    lines = text.split("\n")
    body = "\n".join([lines[0]] + [line for line in lines[1:] if line.strip()])
    return f"={ident} {body}\n\n" if body else f"={ident}\n\n"
