"""Queries of KataGo's JSON analysis protocol: parsing and checking, no device work.

``parse_query`` turns one request line's JSON object into a :class:`Query`
(board, moves, turns to analyse, rules, komi, visits, what to include), or
raises :class:`QueryError` with the message KataGo would give: ``eval.analysis``
replies with it as an error for that id. Rule names of KataGo that our presets
do not spell are mapped to the nearest preset with a warning saying what is
not supported.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any

import numpy as np

from eval.engine import EngineError, rules_from_json, rules_json
from eval.katago_names import KATAGO_SEARCH_FIELDS, KATAGO_SEARCH_SWITCHES
from eval.players import keep_out
from gojax import BLACK, RULE_PRESETS, WHITE, SetupError, get_rules, gtp_to_action, place_stones
from gojax.games import MAX_SIZE, MIN_SIZE, handicap_stones

REPORT_AS = ("BLACK", "WHITE", "SIDETOMOVE")
# A query's visits: KataGo's bound (2^50). A search stops at the most its tree holds,
# ``MAX_TREE_VISITS`` root visits by default (eval.analysis), or earlier at its maxTime or
# a terminate; so "maxVisits": 10000000 (KaTrain's pondering) searches until one of them.
MAX_VISITS = 1 << 50
MAX_VISITS_TEXT = "2^50"
# The most root visits one search tree holds (its nodes are allocated when it is compiled):
# the analysis engine's default tree size, and GTP's bound on maxVisits.
MAX_TREE_VISITS = 1 << 16
MAX_KOMI = 400.0
MAX_MOVES_PER_POINT = 4  # longest game record: 4 moves per point (1444 on 19x19)
DEFAULT_PV_LENGTH = 15  # moves after the first, KataGo's analysisPVLen

# KataGo rule names that our presets do not spell: (preset, whiteHandicapBonus,
# default komi, what of the rules is not supported and replaced by the preset's).
_KATAGO_NAMES = {
    "ancient-territory": ("japanese", "0", 6.5, "group tax"),
    "ancient-area": ("chinese", "0", 7.5, "group tax"),
    "stone-scoring": ("chinese", "0", 7.5, "group tax"),
    "chinese-kgs": ("chinese-ogs", "N", 7.5, None),
    "bga": ("aga", "N-1", 7.5, None),
    "french": ("aga", "N-1", 7.5, None),
    "aga-button": ("aga", "N-1", 7.0, "the button"),
    "goe": ("tromp-taylor", "0", 7.5, None),
    "ing": ("tromp-taylor", "0", 7.5, None),
}
_DEFAULT_KOMI = {"new-zealand": 7.0, "japanese": 6.5}  # KataGo's where it is not 7.5
_BONUS = {"none": "0", "n": "N", "n-1": "N-1"}

# Query fields that are read and honoured.
_FIELDS = {
    "id",
    "action",
    "boardXSize",
    "boardYSize",
    "initialStones",
    "initialPlayer",
    "moves",
    "analyzeTurns",
    "rules",
    "komi",
    "whiteHandicapBonus",
    "maxVisits",
    "analysisPVLen",
    "includeOwnership",
    "includePolicy",
    "overrideSettings",
    "priority",
    "priorities",
    "avoidMoves",
    "allowMoves",
    "includePVVisits",
    "includeMovesOwnership",
    "includeNoResultValue",
    "includeOwnershipStdev",
    "includeMovesOwnershipStdev",
    "reportDuringSearchEvery",
    "firstReportDuringSearchAfter",
    "rootFpuReductionMax",
    "rootPolicyTemperature",
}
# Top-level query fields that set KataGo's search settings (they win over the same
# settings in overrideSettings): the field -> the settings it sets.
_TOP_LEVEL_SETTINGS = {
    "rootFpuReductionMax": ("rootFpuReductionMax",),
    # KataGo's analysis engine sets the early temperature with it.
    "rootPolicyTemperature": ("rootPolicyTemperature", "rootPolicyTemperatureEarly"),
}
# Settings of KataGo's search that gojax's has not, and the value at which they ask for
# nothing (KataGo's default): another value is not honoured, and the engine says so once
# (``unsupported_notice``), not with every query.
UNSUPPORTED_SETTINGS = {
    "playoutDoublingAdvantage": (0.0, "gojax's search has no playout doubling advantage"),
    "antiMirror": (False, "gojax's search has no anti-mirror play"),
    "humanSLProfile": ("", "gojax runs no human SL model"),
}
_UNSUPPORTED_SUFFIX = "; analysed without it (said once)"

_SETTINGS = {
    "maxVisits",
    "maxTime",
    "ignorePreRootHistory",
    "analysisPVLen",
    "reportAnalysisWinratesAs",
    *KATAGO_SEARCH_FIELDS,
    *KATAGO_SEARCH_SWITCHES,
    *UNSUPPORTED_SETTINGS,
}  # overrideSettings


def said_once(field: str, message: str) -> bool:
    """Whether a query warning is one an engine gives once, to the first query that
    earns it, not to every one: a setting it does not honour
    (``UNSUPPORTED_SETTINGS``) or rules it replaces by the nearest preset."""
    return field == "rules" or message.endswith(_UNSUPPORTED_SUFFIX)


def _asks_for_nothing(name: str, value: Any) -> bool:
    """Whether ``value`` of an unsupported setting is its default (JSON or text, as
    KataGo's config reads it)."""
    default = UNSUPPORTED_SETTINGS[name][0]
    text = value if isinstance(value, str) else json.dumps(value)
    text = text.strip().lower()
    if isinstance(default, bool):
        return text == str(default).lower()
    if isinstance(default, float):
        try:
            return float(text) == default
        except ValueError:
            return False
    return text in ("", '""')


def unsupported_notice(name: str) -> str:
    """The warning for a query that sets ``name`` of ``UNSUPPORTED_SETTINGS``."""
    return f"{name} is not supported: {UNSUPPORTED_SETTINGS[name][1]}{_UNSUPPORTED_SUFFIX}"


class QueryError(ValueError):
    """A query that cannot be analysed: KataGo's ``{"id", "field", "error"}`` reply."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclasses.dataclass(frozen=True)
class Query:
    """One parsed analysis query: a game record and what to report on it."""

    id: str
    size: int
    rules: str  # a preset of ``gojax._rules.RULE_PRESETS``
    komi: float  # the komi the positions are scored with, handicap bonus included
    setup: np.ndarray  # [P] int8 stones before the first move (+1 black, -1 white)
    first_player: int  # +1 black, -1 white: to move at turn 0
    colours: np.ndarray  # [T] int8 colour of each move
    actions: np.ndarray  # [T] int32 action of each move (P = pass)
    turns: tuple[int, ...]  # positions to analyse, ascending: turn t is after t moves
    visits: int  # the root's visit budget (1: the network alone)
    include_ownership: bool
    include_policy: bool
    include_pv_visits: bool
    include_moves_ownership: bool
    include_no_result_value: bool
    include_ownership_stdev: bool
    include_moves_ownership_stdev: bool
    pv_length: int  # moves of each principal variation after its first
    report_as: str  # one of REPORT_AS
    # [2, P + 1] int32 or None: avoidMoves / allowMoves as gojax.search.search's ``avoid``:
    # for Black (0) and White (1) to move, the ply below the root until which each move is
    # kept out of the search; 0 never.
    avoid: np.ndarray | None = None
    # (first, every): seconds after the search starts of the first report during it and
    # between later ones (reportDuringSearchEvery, firstReportDuringSearchAfter; every is
    # inf when only the first is asked for), or None: no report before the final one.
    reports: tuple[float, float] | None = None
    max_time: float = math.inf  # seconds a search may take (overrideSettings maxTime)
    # (SearchConfig field, value) of KataGo's search settings the query sets
    # (overrideSettings by KataGo's names, eval.katago_names; rootFpuReductionMax,
    # rootPolicyTemperature), sorted; each applies to the search kinds its table row names.
    search: tuple[tuple[str, float | bool], ...] = ()
    # (turn, priority) of every turn of ``turns`` whose priority is not 0 (``priority``,
    # ``priorities``): higher is analysed first; ties go to the earlier query.
    priorities: tuple[tuple[int, int], ...] = ()
    # overrideSettings ignorePreRootHistory: whether the network sees the moves before
    # each analysed position (False) or not (True); None: the engine's default.
    ignore_history: bool | None = None

    def priority(self, turn: int) -> int:
        """The priority of analysing ``turn`` (KataGo's default 0)."""
        return self._priority_of.get(turn, 0)

    @functools.cached_property
    def _priority_of(self) -> dict[int, int]:
        # Built once: the work is sorted by priority, one call per position.
        return dict(self.priorities)

    @property
    def max_moves(self) -> int:
        """The state's move cap: ``2 * size**2`` (pgx's), doubled for the rare games that
        leave fewer than ``3 * size`` plies to search below their last position."""
        cap = 2 * self.size * self.size
        while cap < len(self.actions) + 3 * self.size:
            cap *= 2
        return cap


# ----------------------------------------------------------------------------
# Parsing


def _integer(value: Any, field: str, low: int, high: int, message: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryError(field, message)
    if not low <= value <= high or not float(value).is_integer():  # range first: no overflow
        raise QueryError(field, message)
    return int(value)


def _komi(value: Any, field: str) -> float:
    message = "Must be a integer or half-integer from -400.0 to 400.0"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryError(field, message)
    if not (abs(value) <= MAX_KOMI and float(2 * value).is_integer()):
        raise QueryError(field, message)
    return float(value)


def _seconds(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryError(field, "Must be number of seconds from 0.001 to 1000000.0")
    if not (math.isfinite(value) and 0.001 <= value <= 1e6):
        raise QueryError(field, "Must be number of seconds from 0.001 to 1000000.0")
    return float(value)


def _reports(request: dict) -> tuple[float, float] | None:
    """``(first, every)`` of the reports during the search, as KataGo reads them: the
    first after ``every`` unless ``firstReportDuringSearchAfter`` says otherwise."""
    every = first = math.inf
    if "reportDuringSearchEvery" in request:
        every = first = _seconds(request["reportDuringSearchEvery"], "reportDuringSearchEvery")
    if "firstReportDuringSearchAfter" in request:
        first = _seconds(request["firstReportDuringSearchAfter"], "firstReportDuringSearchAfter")
    return None if math.isinf(first) else (first, every)


def _boolean(request: dict, field: str) -> bool:
    value = request.get(field, False)
    if not isinstance(value, bool):
        raise QueryError(field, "Must be a boolean")
    return value


def _player(value: Any, field: str) -> int:
    text = value.upper() if isinstance(value, str) else None
    if text in ("B", "BLACK"):
        return BLACK
    if text in ("W", "WHITE"):
        return WHITE
    raise QueryError(field, 'Must be "b" or "w"')


def _location(text: Any, size: int, field: str, allow_pass: bool) -> int:
    """A GTP vertex (``"D4"``, ``"pass"``) or KataGo's ``"(x,y)"`` (y = 0 on top) → action."""
    if not isinstance(text, str):
        raise QueryError(field, "Must be an array of GTP board vertices")
    stripped = text.strip()
    try:
        if stripped.startswith("(") and stripped.endswith(")"):
            x, y = (int(part) for part in stripped[1:-1].split(","))
            if not (0 <= x < size and 0 <= y < size):
                raise ValueError(text)
            action = y * size + x
        else:
            action = gtp_to_action(stripped, size)
    except ValueError:
        raise QueryError(field, f"Could not parse board location: {text}") from None
    if action == size * size and not allow_pass:
        raise QueryError(field, f"Could not parse board location: {text}")
    return action


def _moves(value: Any, size: int, field: str, allow_pass: bool) -> list[tuple[int, int]]:
    shape = 'Must be an array of pairs of the form: ["b" or "w", GTP board vertex]'
    if not isinstance(value, list):
        raise QueryError(field, shape)
    moves = []
    for pair in value:
        if not isinstance(pair, list) or len(pair) != 2:
            raise QueryError(field, shape)
        try:
            colour = _player(pair[0], field)
        except QueryError:
            raise QueryError(field, f"Could not parse player: {pair[0]}") from None
        moves.append((colour, _location(pair[1], size, field, allow_pass)))
    return moves


def parse_rules(value: Any) -> tuple[str, str, float, str | None]:
    """KataGo's ``rules`` (a name or a JSON object) → ``(preset, whiteHandicapBonus,
    default komi, warning)``.

    Rules no preset has (a group tax, the button, territory scoring with
    superko, suicide or no seki tax) are replaced by the nearest preset, with a
    warning (as KataGo does when a network does not support some rules):
    area scoring keeps its ko and suicide rules, territory scoring becomes
    ``japanese``.

    >>> parse_rules("japanese")[:3]
    ('japanese', '0', 6.5)
    """
    if isinstance(value, str):
        key = value.strip().lower().replace("_", "-").replace(" ", "-")
        if key in _KATAGO_NAMES:
            preset, bonus, komi, missing = _KATAGO_NAMES[key]
        else:
            try:
                preset = get_rules(key).name
            except ValueError:
                raise QueryError("rules", f"Could not parse rules: {value}") from None
            bonus = _BONUS[RULE_PRESETS[preset].handicap_bonus]
            komi, missing = _DEFAULT_KOMI.get(preset, 7.5), None
        warning = None
        if missing:
            # In one spelling (lower case, dashes), whatever the query's: said once.
            warning = f"Rules {key} not supported ({missing}), using {preset} instead"
        return preset, bonus, komi, warning
    if not isinstance(value, dict):
        raise QueryError(
            "rules",
            'Must specify rules string, such as "chinese" or "tromp-taylor", '
            "or a JSON object with detailed rules parameters.",
        )
    fields = dict(value)
    bonus = fields.pop("whiteHandicapBonus", None)
    fields.pop("friendlyPassOk", None)  # only changes how KataGo ends games by passing
    komi = fields.pop("komi", None)
    fields.setdefault("ko", "POSITIONAL")  # KataGo's defaults for a JSON object
    fields.setdefault("suicide", True)
    missing = []
    if str(fields.get("scoring", "AREA")).upper() == "TERRITORY":
        # KataGo's default tax under territory scoring is SEKI.
        japanese = rules_json("japanese")
        fields.setdefault("tax", "SEKI")
        for key, what in (("ko", "superko"), ("suicide", "suicide"), ("tax", "tax")):
            if _upper(fields[key]) != japanese[key]:
                missing.append(f"{what} {json.dumps(fields[key])} with territory scoring")
                fields[key] = japanese[key]
    elif str(fields.get("tax", "NONE")).upper() != "NONE":
        missing.append("group tax")
        fields["tax"] = "NONE"
    if fields.get("hasButton", False):
        missing.append("the button")
        fields["hasButton"] = False
    try:
        preset = rules_from_json(fields)
    except (EngineError, TypeError):
        raise QueryError("rules", f"Could not parse rules: {json.dumps(value)}") from None
    if bonus is None:
        bonus = _BONUS[RULE_PRESETS[preset].handicap_bonus]
    bonus = _handicap_rule(bonus, "rules")
    komi = _DEFAULT_KOMI.get(preset, 7.5) if komi is None else _komi(komi, "rules")
    warning = None
    if missing:
        warning = f"Rules {json.dumps(value)} not supported ({', '.join(missing)}), "
        warning += f"using {preset} instead"
    return preset, bonus, float(komi), warning


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _handicap_rule(value: Any, field: str) -> str:
    text = str(value).strip().upper() if isinstance(value, str | int) else None
    if text not in ("0", "N", "N-1"):
        raise QueryError(field, 'Must be "0", "N" or "N-1"')
    return text


def _position(request: dict) -> tuple[int, np.ndarray, list[tuple[int, int]], int]:
    """``(size, setup [P], moves, first player)`` of a query."""
    size_error = f"Must provide an integer from {MIN_SIZE} to {MAX_SIZE}"
    for field in ("boardXSize", "boardYSize"):
        if field not in request:
            raise QueryError(field, size_error)
    width = _integer(request["boardXSize"], "boardXSize", MIN_SIZE, MAX_SIZE, size_error)
    size = _integer(request["boardYSize"], "boardYSize", MIN_SIZE, MAX_SIZE, size_error)
    if width != size:
        raise QueryError("boardYSize", f"Only square boards are supported, not {width}x{size}")
    stones = _moves(request.get("initialStones", []), size, "initialStones", False)
    try:
        setup = place_stones(size, stones)
    except SetupError as err:  # KataGo too answers such a query with an error
        raise QueryError("initialStones", f"Illegal initial stones: {err}") from None
    if "moves" not in request:
        raise QueryError("moves", "Must specify an array of [player,location] pairs")
    moves = _moves(request["moves"], size, "moves", True)
    limit = MAX_MOVES_PER_POINT * size * size
    if len(moves) > limit:
        raise QueryError("moves", f"Too many moves ({len(moves)}), at most {limit} on this board")
    if "initialPlayer" in request:
        first = _player(request["initialPlayer"], "initialPlayer")
    elif moves:
        first = moves[0][0]
    else:  # KataGo: White moves first after handicap stones
        first = WHITE if handicap_stones(setup, [], size) else BLACK
    return size, setup, moves, first


def _turns(request: dict, moves: int) -> tuple[int, ...]:
    """The turns to analyse, ascending (default: the last position)."""
    if "analyzeTurns" not in request:
        return (moves,)
    turns = request["analyzeTurns"]
    message = "Must specify an array of integers indicating turns to analyze"
    if not isinstance(turns, list):
        raise QueryError("analyzeTurns", message)
    for turn in turns:
        bad = f"Invalid turn number: {turn}" if isinstance(turn, int) else message
        _integer(turn, "analyzeTurns", 0, moves, bad)
    return tuple(sorted({int(t) for t in turns}))


_PRIORITY_RANGE = (-(1 << 62), 1 << 62)


def _priorities(request: dict, turns: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """``Query.priorities``: ``priorities`` (one per entry of ``analyzeTurns``; a turn
    listed twice keeps its highest) if given, else ``priority`` for every turn."""
    base = 0
    if "priority" in request:
        base = _integer(request["priority"], "priority", *_PRIORITY_RANGE, "Must be an integer")
    by_turn = dict.fromkeys(turns, base)
    if "priorities" in request:
        values, listed = request["priorities"], request.get("analyzeTurns")
        message = "Must be an array of integers matching analyzeTurns"
        lists = isinstance(values, list) and isinstance(listed, list)
        if not lists or len(values) != len(listed):
            raise QueryError("priorities", message)
        by_turn = {}
        for turn, value in zip(listed, values, strict=True):
            value = _integer(value, "priorities", *_PRIORITY_RANGE, message)
            by_turn[int(turn)] = max(value, by_turn.get(int(turn), value))
    return tuple((turn, by_turn[turn]) for turn in turns if by_turn[turn])


def _scoring(
    request: dict, setup: np.ndarray, moves: list[tuple[int, int]], size: int
) -> tuple[str, float, str | None]:
    """``(preset, komi with the handicap bonus, warning)`` of a query."""
    if "rules" not in request:
        raise QueryError(
            "rules",
            'Must specify rules string, such as "chinese" or "tromp-taylor", '
            "or a JSON object with detailed rules parameters.",
        )
    rules, bonus, komi, warning = parse_rules(request["rules"])
    if "komi" in request:
        komi = _komi(request["komi"], "komi")
    if "whiteHandicapBonus" in request:
        bonus = _handicap_rule(request["whiteHandicapBonus"], "whiteHandicapBonus")
    stones = handicap_stones(setup, moves, size)
    komi += {"0": 0, "N": stones, "N-1": max(stones - 1, 0)}[bonus]
    return rules, komi, warning


def _max_time(value: Any) -> float:
    """``overrideSettings.maxTime``: seconds, a number or a numeric string as KataGo's
    config reads it."""
    message = "Could not set settings: maxTime must be a number of seconds from 0 to 1e20"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise QueryError("overrideSettings", message) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryError("overrideSettings", message)
    if not (math.isfinite(value) and 0 <= value <= 1e20):
        raise QueryError("overrideSettings", message)
    return float(value)


def _search_settings(request: dict) -> tuple[tuple[str, float | bool], ...]:
    """``Query.search``: KataGo's search settings from ``overrideSettings`` and the
    top-level ``rootFpuReductionMax`` and ``rootPolicyTemperature`` (which win), numbers
    or numeric strings; its switches (``rootSymmetryPruning``) true or false."""
    given = {k: (v, "overrideSettings") for k, v in request.get("overrideSettings", {}).items()}
    for top, names in _TOP_LEVEL_SETTINGS.items():
        if top in request:
            given.update({name: (request[top], top) for name in names})
    fields = {}
    for name, (value, where) in given.items():
        if name in KATAGO_SEARCH_SWITCHES:
            if isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"
            if not isinstance(value, bool):
                message = f"Could not set settings: {name} must be true or false"
                raise QueryError(where, message)
            fields[KATAGO_SEARCH_SWITCHES[name]] = value
            continue
        if name not in KATAGO_SEARCH_FIELDS:
            continue
        field, low, high, _ = KATAGO_SEARCH_FIELDS[name]
        number = value
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = math.nan
        if isinstance(number, bool) or not isinstance(number, int | float):
            number = math.nan
        if not low <= number <= high:  # also refuses nan
            bounds = f"must be a number from {low:g} to {high:g}"
            if where == "overrideSettings":  # as KataGo words a bad setting
                message = f"Could not set settings: {name} {bounds}"
            else:  # a top-level field
                message = f"{where} {bounds}"
            raise QueryError(where, message)
        fields[field] = float(number)
    return tuple(sorted(fields.items()))


def _ignore_history(request: dict) -> bool | None:
    """overrideSettings ``ignorePreRootHistory``: true or false (JSON, or text as KataGo's
    config reads it); None if not given."""
    value = request.get("overrideSettings", {}).get("ignorePreRootHistory")
    if value is None:
        return None
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        message = "Could not set settings: ignorePreRootHistory must be true or false"
        raise QueryError("overrideSettings", message)
    return value


def without_foreign_settings(
    request: dict, query: Query, kind: str
) -> tuple[Query, list[tuple[str, str]]]:
    """``query`` without the search settings a ``kind`` search does not have (KataGo's
    PUCT constants under ``--search puct``), and a warning for each field that set one."""
    foreign = {name for name, setting in KATAGO_SEARCH_FIELDS.items() if kind not in setting.kinds}
    fields = {KATAGO_SEARCH_FIELDS[name].field for name in foreign}
    if not any(field in fields for field, _ in query.search):
        return query, []
    warning = "Needs the KataGo search (--search katago), ignored"
    warnings = []
    if foreign & set(request.get("overrideSettings", {})):
        warnings.append(("overrideSettings", warning))
    warnings += [
        (top, warning)
        for top, names in _TOP_LEVEL_SETTINGS.items()
        if top in request and foreign & set(names)
    ]
    kept = tuple((field, value) for field, value in query.search if field not in fields)
    return dataclasses.replace(query, search=kept), warnings


def _options(
    request: dict,
    visits: int,
    report_as: str,
    warnings: list[tuple[str, str]],
    pv_length: int = DEFAULT_PV_LENGTH,
) -> tuple[int, int, str, float]:
    """``(visits, pv length, perspective, seconds)``: the query's fields over
    ``overrideSettings`` over the engine's defaults."""
    budget_error = f"Must be an integer from 1 to {MAX_VISITS_TEXT}"
    pv_error = "Must be an integer from 1 to 1000"
    settings = request.get("overrideSettings", {})
    if not isinstance(settings, dict):
        raise QueryError("overrideSettings", "Must be an object")
    unknown = sorted(set(settings) - _SETTINGS)
    if unknown:
        message = f"Unknown or unsupported config params: {','.join(unknown)}"
        warnings.append(("overrideSettings", message))
    for name in sorted(UNSUPPORTED_SETTINGS.keys() & settings.keys()):
        if not _asks_for_nothing(name, settings[name]):
            warnings.append(("overrideSettings", unsupported_notice(name)))
    if "maxVisits" in settings:
        visits = _integer(settings["maxVisits"], "overrideSettings", 1, MAX_VISITS, budget_error)
    if "analysisPVLen" in settings:
        pv_length = _integer(settings["analysisPVLen"], "overrideSettings", 1, 1000, pv_error)
    if "reportAnalysisWinratesAs" in settings:
        report_as = str(settings["reportAnalysisWinratesAs"]).upper()
        report_as = {"B": "BLACK", "W": "WHITE"}.get(report_as, report_as)
        if report_as not in REPORT_AS:
            message = "reportAnalysisWinratesAs must be " + "|".join(REPORT_AS)
            raise QueryError("overrideSettings", message)
    seconds = _max_time(settings["maxTime"]) if "maxTime" in settings else math.inf
    if "maxVisits" in request:
        visits = _integer(request["maxVisits"], "maxVisits", 1, MAX_VISITS, budget_error)
    if "analysisPVLen" in request:
        pv_length = _integer(request["analysisPVLen"], "analysisPVLen", 1, 1000, pv_error)
    return visits, pv_length, report_as, seconds


def _avoid(request: dict, size: int) -> np.ndarray | None:
    """``avoidMoves`` / ``allowMoves`` → ``[2, P + 1]`` int32 plies (see ``Query.avoid``)."""
    allow, avoid = "allowMoves" in request, "avoidMoves" in request
    if not allow and not avoid:
        return None
    if allow and avoid:
        raise QueryError("allowMoves", "Cannot specify both allowMoves and avoidMoves")
    field = "allowMoves" if allow else "avoidMoves"
    shape = "Must be a list of dicts with subfields 'player', 'moves', 'untilDepth'"
    entries = request[field]
    if not isinstance(entries, list):
        raise QueryError(field, shape)
    if allow and len(entries) > 2:
        raise QueryError(field, "Currently allowMoves only allows at most one entry per player")
    plies = np.zeros((2, size * size + 1), np.int32)
    players_seen = set()
    for entry in entries:
        if not isinstance(entry, dict) or not {"player", "moves", "untilDepth"} <= set(entry):
            raise QueryError(field, shape)
        player = _player(entry["player"], field)
        if not isinstance(entry["moves"], list):
            raise QueryError(field, "Must be an array of GTP board vertices")
        actions = [_location(v, size, field, allow_pass=True) for v in entry["moves"]]
        until = _integer(entry["untilDepth"], field, 1, 10**9, "Must be a positive integer")
        if allow and player in players_seen:
            message = "Cannot specify allowMoves more than once for the same player"
            raise QueryError(field, message)
        keep_out(plies, player, actions, until, allow=allow)
        players_seen.add(player)
    return plies


def parse_query(
    request: dict, *, visits: int, report_as: str, pv_length: int = DEFAULT_PV_LENGTH
) -> tuple[Query, list[tuple[str, str]]]:
    """Check one analysis query and return it with its ``(field, warning)`` list.

    Args:
      request: the decoded JSON object.
      visits: the visit budget when the query names none.
      report_as: the default perspective of reported numbers.
      pv_length: the default moves of each principal variation after its first.

    Raises QueryError naming the field for anything that cannot be analysed.
    """
    if not isinstance(request.get("id"), str):
        raise QueryError("id", 'Request must have a string "id" field')
    warnings: list[tuple[str, str]] = []
    size, setup, moves, first = _position(request)
    turns = _turns(request, len(moves))
    priorities = _priorities(request, turns)
    rules, komi, warning = _scoring(request, setup, moves, size)
    if warning:
        warnings.append(("rules", warning))
    visits, pv_length, report_as, max_time = _options(
        request, visits, report_as, warnings, pv_length
    )
    search = _search_settings(request)
    ignore_history = _ignore_history(request)
    include_ownership = _boolean(request, "includeOwnership")
    include_policy = _boolean(request, "includePolicy")
    include_pv_visits = _boolean(request, "includePVVisits")
    include_moves_ownership = _boolean(request, "includeMovesOwnership")
    include_no_result_value = _boolean(request, "includeNoResultValue")
    include_ownership_stdev = _boolean(request, "includeOwnershipStdev")
    include_moves_ownership_stdev = _boolean(request, "includeMovesOwnershipStdev")
    avoid = _avoid(request, size)
    reports = _reports(request)
    for field in sorted(set(request) - _FIELDS):
        warnings.append((field, "Unexpected or unused field, do you have a typo?"))
    query = Query(
        id=request["id"],
        size=size,
        rules=rules,
        komi=komi,
        setup=setup,
        first_player=first,
        colours=np.asarray([c for c, _ in moves], np.int8),
        actions=np.asarray([a for _, a in moves], np.int32),
        turns=turns,
        visits=visits,
        include_ownership=include_ownership,
        include_policy=include_policy,
        include_pv_visits=include_pv_visits,
        include_moves_ownership=include_moves_ownership,
        include_no_result_value=include_no_result_value,
        include_ownership_stdev=include_ownership_stdev,
        include_moves_ownership_stdev=include_moves_ownership_stdev,
        pv_length=pv_length,
        report_as=report_as,
        avoid=avoid,
        reports=reports,
        max_time=max_time,
        priorities=priorities,
        search=search,
        ignore_history=ignore_history,
    )
    return query, warnings
