"""GTP's input for ``gojax gtp`` (:mod:`eval.gtp`): the protocol's line rules and the
commands' arguments.

:func:`preprocess` applies GTP v2's rules to an input line; the small parsers below turn
a command's words into colours, numbers and time settings, raising :class:`GTPError`
(whose message is the GTP error text) on anything else; :class:`AnalyzeOptions` parses
the arguments of ``lz-analyze``, ``kata-analyze`` and their genmove forms. Apart from
the server so that the rules of what a command accepts read in one place, and so that
the analysis commands and the server share them without importing each other.
"""

from __future__ import annotations

import math
import re

import numpy as np

from eval.engine import TimeSettings
from eval.players import keep_out
from gojax import BLACK, WHITE, gtp_to_action

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DEFAULT_INTERVAL_CS = 100  # analysis report interval when none is given (1 s)


class GTPError(Exception):
    """A failed command; the message is the GTP error text."""


def preprocess(line: str) -> str:
    """GTP's input rules: drop control characters but HT/LF, HT → space, cut ``#`` comments."""
    line = _CONTROL.sub("", line).replace("\t", " ")
    return line.split("#", 1)[0].strip()


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
