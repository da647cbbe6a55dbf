"""KataGo's runtime parameters over GTP: ``kata-list-params``, ``kata-get-param``,
``kata-get-params``, ``kata-set-param`` and ``kata-set-params``.

Bot front-ends and GUIs change an engine's search between games (or moves)
with these, using KataGo's parameter names. gojax honours the ones it has,
for the player it runs:

* every engine: ``allowResignation``, ``delayMoveScale`` and ``delayMoveMax``
  (KataGo's: a ``genmove`` answers after a random wait of mean
  ``0.5 * delayMoveScale / (prior + 0.1)`` seconds, at most ``delayMoveMax``,
  so that a bot moves at a human's pace; scale 0, the default, waits not at
  all); with a network ``analysisIgnorePreRootHistory``
  (KataGo's true: the network of ``lz-analyze``/``kata-analyze`` sees no move
  played before the analysed position);
* a search (``--player search`` or ``uct``): ``maxVisits`` (root visits,
  KataGo's count: ``maxVisits - 1`` simulations; 1 is the network's policy
  alone), ``maxTime`` (seconds a ``genmove`` may think, whatever the
  clock allows; KataGo's default 1e20 is no limit), ``maxVisitsPondering``
  (the root visits ``lz-analyze``/``kata-analyze`` grow their search to,
  ``--ponder-visits``; at least a move's) and ``maxTimePondering`` (seconds
  they grow it for);
* PUCT, KataGo's PUCT and UCT: ``ponderingEnabled`` (KataGo's false: when
  true, the engine goes on searching the position after each command, on the
  opponent's time, until the next command arrives, to the same bounds as
  ``lz-analyze``; the next ``genmove`` goes on from that tree);
* every search: ``rootSymmetryPruning`` (KataGo's true: at a position a board
  symmetry leaves unchanged, one move of each set of equivalent moves is
  searched and all are reported, ``isSymmetryOf``);
* PUCT and KataGo's PUCT (and UCT): ``useLcbForSelection``;
* PUCT and KataGo's PUCT: ``rootPolicyTemperature``,
  ``rootPolicyTemperatureEarly``, ``chosenMoveTemperatureHalflife``; and
  UCT: ``chosenMoveTemperature``, ``chosenMoveTemperatureEarly`` (the move
  played is drawn from the visits at that temperature; 0, the default here,
  plays the best);
* KataGo's PUCT (``--search katago``): ``staticScoreUtilityFactor``,
  ``dynamicScoreUtilityFactor``, ``cpuctExploration``,
  ``cpuctExplorationLog``, ``cpuctExplorationBase``,
  ``cpuctUtilityStdevScale``, ``fpuReductionMax``, ``rootFpuReductionMax``,
  ``wideRootNoise`` (``gojax.search.SearchConfig``'s fields of the same
  meaning), and ``analysisWideRootNoise`` (the wide root noise of
  ``lz-analyze`` and ``kata-analyze``, KataGo's 0.04; moves are searched with
  ``wideRootNoise``, 0).

Anything else is refused with KataGo's message, so a controller learns at
once that a setting did not take. A change of the search compiles and times
the new search at once (seconds), so the next timed move does not pay for it;
``kata-set-params`` checks every value before it changes anything.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from typing import Any

from eval.analysis_query import MAX_TREE_VISITS
from eval.engine import DELAY_MOVE_MAX, Engine
from eval.katago_names import KATAGO_SEARCH_FIELDS, KATAGO_SEARCH_SWITCHES
from eval.players import SearchPlayer
from gojax.search import KATAGO_PUCT_RANGES, MOVE_TEMPERATURE_RANGE

NO_TIME_LIMIT = 1e20  # KataGo's maxTime when none is set


class ParamError(ValueError):
    """A parameter that cannot be read or set; the message is the GTP error text."""


def _integer(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]{1,12}", text) or not low <= int(text) <= high:
            raise ValueError(f"an integer from {low} to {high}")
        return int(text)

    return parse


def _number(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # also refuses nan
            raise ValueError(f"a number from {low:g} to {high:g}")
        return value

    return parse


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError("true or false")
    return text.lower() == "true"


@dataclasses.dataclass(frozen=True)
class Param:
    """One of KataGo's parameters as gojax honours it.

    ``field``: the ``SearchConfig`` field it sets, or None (the engine's own);
    ``kinds``: the search kinds it applies to (``()``: any player, ``None``:
    any search); ``network``: only for a player with a network.
    """

    parse: Callable[[str], Any]
    field: str | None = None
    kinds: tuple[str, ...] | None = None
    network: bool = False


PARAMS: dict[str, Param] = {
    "allowResignation": Param(_boolean, kinds=()),
    # A genmove's answer waits a human-like time (eval.engine.move_delay; KataGo's ranges).
    "delayMoveScale": Param(_number(0.0, 10000.0), kinds=()),
    "delayMoveMax": Param(_number(0.0, DELAY_MOVE_MAX), kinds=()),
    "maxVisits": Param(_integer(1, MAX_TREE_VISITS)),
    "maxTime": Param(_number(0.0, NO_TIME_LIMIT)),
    "maxVisitsPondering": Param(_integer(1, MAX_TREE_VISITS)),
    "maxTimePondering": Param(_number(0.0, NO_TIME_LIMIT)),
    "useLcbForSelection": Param(_boolean, "lcb_selection", ("puct", "katago", "uct")),
    **{
        name: Param(_number(setting.low, setting.high), setting.field, setting.kinds)
        for name, setting in KATAGO_SEARCH_FIELDS.items()
    },
    # The move played (GTP only: the analysis engine plays none).
    "chosenMoveTemperature": Param(
        _number(*MOVE_TEMPERATURE_RANGE), "move_temperature", ("puct", "katago", "uct")
    ),
    "chosenMoveTemperatureEarly": Param(
        _number(*MOVE_TEMPERATURE_RANGE), "move_temperature_early", ("puct", "katago", "uct")
    ),
    # wideRootNoise of the analysis commands (lz-analyze, kata-analyze; KataGo's 0.04).
    "analysisWideRootNoise": Param(
        _number(*KATAGO_PUCT_RANGES["wide_root_noise"]), kinds=("katago",)
    ),
    # Think on the opponent's time (after each move, until the next command).
    "ponderingEnabled": Param(_boolean, kinds=("puct", "katago", "uct")),
    # At a symmetric position, search one move of each set of equivalent moves.
    **{name: Param(_boolean, field) for name, field in KATAGO_SEARCH_SWITCHES.items()},
    # Whether the network of an analysis sees the moves before the analysed position.
    "analysisIgnorePreRootHistory": Param(_boolean, kinds=(), network=True),
}


_EARLY_FIELDS = ("root_policy_temperature_early", "move_temperature_early")


def _effective(config: Any, field: str) -> Any:
    """A ``SearchConfig`` field's value as the search uses it: KataGo's defaults for the
    fields whose None means one (the root FPU reduction; the early root temperature)."""
    if field == "root_fpu_reduction":
        return config.root_fpu
    if field == "root_policy_temperature_early" and config.root_policy_temperature_early is None:
        return config.root_policy_temperature
    if field in ("move_temperature", "move_temperature_early"):
        # Unset, a GTP player plays its best move (temperature_moves 0): temperature 0.
        value = getattr(config, field)
        if value is None and field == "move_temperature_early":
            value = config.move_temperature
        return 0.0 if value is None else value
    return getattr(config, field)


def _applies(param: Param, engine: Engine) -> bool:
    player = engine.player
    if param.network and engine.network() is None:
        return False
    if param.kinds == ():
        return True
    if not isinstance(player, SearchPlayer):
        return False
    return param.kinds is None or player.config.kind in param.kinds


def names(engine: Engine) -> list[str]:
    """The parameters ``engine`` honours (``kata-list-params``), in a fixed order."""
    return [name for name, param in PARAMS.items() if _applies(param, engine)]


def value(engine: Engine, name: str) -> Any:
    """The current value of ``name`` (``kata-get-param``); ParamError if not honoured."""
    param = PARAMS.get(name)
    if param is None or not _applies(param, engine):
        raise ParamError(f"Invalid parameter: {name}")
    if name == "allowResignation":
        return engine.resign_threshold is not None
    if name == "delayMoveScale":
        return engine.delay_move_scale
    if name == "delayMoveMax":
        return engine.delay_move_max
    player = engine.player
    if name == "maxVisits":
        return player.visits + 1
    if name == "maxTime":
        return min(engine.max_time, NO_TIME_LIMIT)
    if name == "maxVisitsPondering":
        return player.ponder_visits
    if name == "maxTimePondering":
        return min(engine.max_ponder_time, NO_TIME_LIMIT)
    if name == "analysisWideRootNoise":
        return player.analysis_wide_root_noise
    if name == "ponderingEnabled":
        return engine.pondering
    if name == "analysisIgnorePreRootHistory":
        return engine.analysis_ignore_pre_root_history
    return _effective(player.config, param.field)


def values(engine: Engine) -> dict[str, Any]:
    """Every honoured parameter and its value (``kata-get-params``)."""
    return {name: value(engine, name) for name in names(engine)}


def dump(data: Any) -> str:
    """JSON as KataGo writes it: compact, ``true``/``false``."""
    return json.dumps(data, separators=(",", ":"))


def set_params(engine: Engine, settings: dict[str, str], *, warm: bool = True) -> None:
    """Set every parameter of ``settings`` (name -> text, as KataGo's config reads it)
    or, if any is unknown, not honoured here or out of range, none (ParamError).
    A changed search is compiled and timed at once unless ``warm`` is False."""
    parsed: dict[str, Any] = {}
    for name, text in settings.items():
        param = PARAMS.get(name)
        if param is None or not _applies(param, engine):
            raise ParamError(
                "Could not set params: Unrecognized or non-overridable parameter in "
                f"kata-set-params: {name}"
            )
        try:
            parsed[name] = param.parse(text.strip())
        except ValueError as error:
            message = f"Could not set params: {name} must be {error}, not {text!r}"
            raise ParamError(message) from None
    fields = {PARAMS[n].field: v for n, v in parsed.items() if PARAMS[n].field is not None}
    player = engine.player
    changes_search = "maxVisits" in parsed or fields
    if changes_search:
        # An early temperature compares as stored: one set equal to the late one stays
        # where it is when the late one changes later, as in KataGo.
        current = {
            field: getattr(player.config, field)
            if field in _EARLY_FIELDS
            else _effective(player.config, field)
            for field in fields
        }
        if "move_temperature_early" in fields and player.config.move_temperature is None:
            fields.setdefault("move_temperature", 0.0)  # the late one as it plays: 0
        visits = parsed.get("maxVisits", player.visits + 1) - 1
        if visits == player.visits and fields == current:
            changes_search = False  # nothing new: keep the tree and the compiled search
    if changes_search:
        try:
            player.set_search(visits, **fields)
        except ValueError as error:
            raise ParamError(f"Could not set params: {error}") from None
    if "maxTime" in parsed:
        seconds = parsed["maxTime"]
        engine.max_time = math.inf if seconds >= NO_TIME_LIMIT else seconds
    if "maxVisitsPondering" in parsed:
        player.ponder_visits = parsed["maxVisitsPondering"]
    if "maxTimePondering" in parsed:
        seconds = parsed["maxTimePondering"]
        engine.max_ponder_time = math.inf if seconds >= NO_TIME_LIMIT else seconds
    if "analysisWideRootNoise" in parsed:  # the next analysis compiles its search
        player.analysis_wide_root_noise = parsed["analysisWideRootNoise"]
    if "analysisIgnorePreRootHistory" in parsed:  # the next analysis shows or hides it
        engine.analysis_ignore_pre_root_history = parsed["analysisIgnorePreRootHistory"]
    if "allowResignation" in parsed:
        engine.allow_resignation(parsed["allowResignation"])
    if "delayMoveScale" in parsed:
        engine.delay_move_scale = parsed["delayMoveScale"]
    if "delayMoveMax" in parsed:
        engine.delay_move_max = parsed["delayMoveMax"]
    pondering_from = engine.pondering
    if "ponderingEnabled" in parsed:
        engine.pondering = parsed["ponderingEnabled"]
    if warm and changes_search:
        engine.warm_again()  # the search, and the pondering if on
    elif warm and engine.pondering and (not pondering_from or "maxVisitsPondering" in parsed):
        engine.warm_pondering()  # a new pondering search: compiled now, not mid-game


def settings_from_text(text: str) -> dict[str, str]:
    """``gojax gtp --override-config``'s ``NAME=VALUE,NAME=VALUE`` (KataGo's
    ``-override-config``); ParamError for an entry without ``=``."""
    settings = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, equals, value = entry.partition("=")
        if not equals or not name.strip():
            raise ParamError(f"--override-config: {entry!r} is not NAME=VALUE")
        settings[name.strip()] = value.strip()
    return settings


def settings_from_json(text: str) -> dict[str, str]:
    """``kata-set-params``' argument: a JSON object; values other than strings are read
    as their JSON text, as KataGo does."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ParamError("Could not set params: Argument to kata-set-params must be a json object")
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}
