"""KataGo's command line and config files, for clients set up for the ``katago`` executable.

GUIs and tools start KataGo as ``<exe> analysis -model M -config C.cfg
-override-config k=v,k2=v2`` (KaTrain; it adds ``-analysis-threads N``) or
``<exe> gtp -model M -config C.cfg`` (Lizzie, Sabaki). ``gojax analysis`` and
``gojax gtp`` take that form too, so such a client starts gojax with its
executable set to ``gojax``: this module reads the config file as KataGo's
``ConfigParser`` does (:func:`read_settings`) and turns the keys gojax has into
its own settings (:func:`analysis_options`, :func:`gtp_options`). Keys that only
tune KataGo's machinery (threads, batch sizes, caches, devices, logs) have
nothing to do here; keys of behaviour gojax lacks are not supported. Both are
named in one line on stderr (:func:`ignored_line`), once, and the engine starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from typing import Any

# ----------------------------------------------------------------------------
# Reading: KataGo's config format


class ConfigError(ValueError):
    """A config file or override that cannot be read, or a value out of KataGo's range."""


def _read_file(path: str, settings: dict[str, str], included: list[str]) -> None:
    """Add the ``key = value`` lines of ``path`` to ``settings`` as KataGo's ConfigParser
    reads them: lines trimmed, ``#`` starts a comment anywhere, ``@include FILE`` reads
    another file (relative to this one's folder) in place, a key given twice in one file
    is an error, and a later file's key replaces an earlier one's."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise ConfigError(f"cannot read KataGo config {path}: {err.strerror}") from None
    here: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}, line {number}"
        if line.startswith("@"):
            directive, _, rest = line.partition(" ")
            name = rest.strip(" \t=").strip("'\"")
            if directive != "@include" or not name:
                raise ConfigError(f"{where}: unsupported directive {line!r}")
            target = os.path.join(os.path.dirname(path), name)
            if target in included or os.path.abspath(target) == os.path.abspath(path):
                raise ConfigError(f"{where}: {name} is included twice")
            included.append(target)
            _read_file(target, settings, included)
            continue
        key, equals, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise ConfigError(f"{where}: not a 'key = value' line: {raw.strip()!r}")
        if key in here:
            raise ConfigError(f"{where}: key {key} is given twice")
        here.add(key)
        settings[key] = value


# KataGo's Setup::getMutexKeySets: a rule given one way replaces the rule given the other.
_RULE_KEYS = ("koRule", "scoringRule", "taxRule", "multiStoneSuicideLegal", "hasButton")
_RULE_KEYS += ("whiteHandicapBonus", "friendlyPassOk")


def parse_overrides(text: str) -> dict[str, str]:
    """KataGo's ``-override-config`` text, ``key=value, key=value``; an empty value
    removes the key (as KataGo's)."""
    settings = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        key, equals, value = entry.partition("=")
        if not equals or not key.strip():
            raise ConfigError(f"-override-config: could not find '=' in {entry!r}")
        settings[key.strip()] = value.strip()
    return settings


def read_settings(config: str | None, overrides: list[str] | None = None) -> dict[str, str]:
    """The settings of KataGo's ``-config FILE`` (None: none) with every
    ``-override-config`` applied in order, as KataGo's command line reads them."""
    settings: dict[str, str] = {}
    if config:
        _read_file(config, settings, [])
    for text in overrides or []:
        new = parse_overrides(text)
        if "rules" in new:
            for key in _RULE_KEYS:
                settings.pop(key, None)
        if any(key in new for key in _RULE_KEYS):
            settings.pop("rules", None)
        for key, value in new.items():
            if value:
                settings[key] = value
            else:
                settings.pop(key, None)
    return settings


# ----------------------------------------------------------------------------
# Values, read as KataGo's config reads them


def _boolean(key: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "t", "y"):
        return True
    if lowered in ("false", "0", "no", "f", "n"):
        return False
    raise ConfigError(f"KataGo config: could not parse {text!r} as bool for key {key}")


def _number(key: str, text: str, low: float, high: float) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not low <= value <= high:  # nan too
        raise ConfigError(f"KataGo config: key {key} must be a number from {low:g} to {high:g}")
    return value


def _integer(key: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        bound = "2^50" if high == 1 << 50 else str(high)
        raise ConfigError(f"KataGo config: key {key} must be an integer from {low} to {bound}")
    return value


# ----------------------------------------------------------------------------
# What gojax does with each key


# Keys that tune KataGo's own machinery: threads, batching, caches, devices, files and logs.
_NO_EFFECT = {
    "numSearchThreads",
    "numSearchThreadsPerAnalysisThread",
    "numAnalysisThreads",
    "nnMaxBatchSize",
    "nnMutexPoolSizePowerOfTwo",
    "nnRandomize",
    "nnRandSeed",
    "numNNServerThreadsPerModel",
    "maxBoardXSizeForNNBuffer",  # gojax analysis reads these three for its warm-up
    "maxBoardYSizeForNNBuffer",
    "requireMaxBoardSize",
    "homeDataDir",
    "mutexPoolSize",
    "numVirtualLossesPerThread",
    "nodeTableShardsPowerOfTwo",
    "useFP16",
    "useNHWC",
    "searchRandSeed",
    "startupPrintMessageToStderr",
    "ogsChatToStderr",
    "warnUnusedFields",
    "conservativePass",
}
_NO_EFFECT_PREFIXES = ("log", "cuda", "opencl", "trt", "metal", "coreml", "eigen", "gpu", "onnx")

# Keys whose value, when it is this one (KataGo's default, or what gojax does anyway),
# asks for nothing gojax lacks; another value is not supported.
_AS_GOJAX = {
    "assumeMultipleStartingBlackMovesAreHandicap": True,  # handicap stones are counted so
    "preventCleanupPhase": True,  # gojax never enters KataGo's cleanup phase
    "useGraphSearch": False,
    "playoutDoublingAdvantage": 0.0,
    "antiMirror": False,
    "resignConsecTurns": 3.0,
    "useUncertainty": False,
    "useNoisePruning": False,
}

# Why a key is not supported, where a word helps.
_WHY = {
    "humanSLProfile": "no human SL model",
    "playoutDoublingAdvantage": "no playout doubling advantage",
    "antiMirror": "no anti-mirror play",
}


def _no_effect(key: str) -> bool:
    return key in _NO_EFFECT or key.startswith(_NO_EFFECT_PREFIXES)


def _as_gojax(key: str, text: str) -> bool:
    wanted = _AS_GOJAX[key]
    try:
        if isinstance(wanted, bool):
            return _boolean(key, text) == wanted
        return float(text) == wanted
    except (ConfigError, ValueError):
        return False


@dataclasses.dataclass
class Mapped:
    """A config's keys as gojax takes them.

    Attributes:
      options: engine options by name (``analysis_options``: ``AnalysisEngine``'s
        keywords; ``gtp_options``: ``gojax gtp``'s flags by their ``argparse`` names).
      settings: KataGo parameters for ``kata-set-params`` (``gojax gtp`` only).
      no_effect: keys with nothing to do here (threads, caches, devices, logs).
      unsupported: keys of behaviour gojax lacks, each with why if known.
    """

    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    settings: dict[str, str] = dataclasses.field(default_factory=dict)
    no_effect: list[str] = dataclasses.field(default_factory=list)
    unsupported: list[str] = dataclasses.field(default_factory=list)

    def not_supported(self, key: str, why: str | None = None) -> None:
        why = why or _WHY.get(key)
        self.unsupported.append(f"{key} ({why})" if why else key)


# gojax gtp's and gojax analysis's --nn-cache default (log2): 32,768 evaluations (a
# 19x19 one with its ownership is ~2.9 KB: ~95 MB a table), a hundred-move game reviewed
# at 64 visits a move and more.
DEFAULT_NN_CACHE = 15
# The largest network cache taken from a config: gojax's table is allocated whole when
# first used (a 19x19 evaluation with ownership ~2.9 KB: 2^16 ~190 MB), KataGo's entry by
# entry, so KataGo's usual 20 would reserve gigabytes here.
MOST_NN_CACHE = 16


def _sort_out(key: str, text: str, mapped: Mapped) -> bool:
    """File ``key`` under no effect or not supported if it is one of those, or take
    ``nnCacheSizePowerOfTwo`` (both engines' ``nn_cache``); True if so."""
    if key == "nnCacheSizePowerOfTwo":
        size = _integer(key, text, -1, 48)
        if size > MOST_NN_CACHE:
            mapped.not_supported(f"{key} above {MOST_NN_CACHE}", f"{MOST_NN_CACHE} used")
        mapped.options["nn_cache"] = min(max(size, 0), MOST_NN_CACHE)
        return True
    if _no_effect(key):
        mapped.no_effect.append(key)
        return True
    if key in _AS_GOJAX:
        if not _as_gojax(key, text):
            mapped.not_supported(key)
        return True
    return False


def analysis_options(settings: dict[str, str], search: str, config_file: bool = True) -> Mapped:
    """``gojax analysis``'s options from a KataGo analysis config's ``settings``, for an
    engine searching with ``search`` (``puct`` or ``katago``). Options: ``visits``,
    ``max_time``, ``pv_length``, ``report_as``, ``wide_root_noise``,
    ``ignore_pre_root_history``, ``root_symmetry_pruning`` and ``search_settings``
    (``SearchConfig`` fields by KataGo's names, ``eval.katago_names``).
    ``reportAnalysisWinratesAs`` defaults to KataGo's own ``SIDETOMOVE`` when a config
    file (``config_file``) names none. ConfigError for a value KataGo would refuse."""
    from eval.analysis_query import MAX_VISITS, REPORT_AS
    from eval.katago_names import KATAGO_SEARCH_FIELDS, KATAGO_SEARCH_SWITCHES

    mapped = Mapped(options={"report_as": "SIDETOMOVE"} if config_file else {})
    fields: dict[str, float] = {}
    for key, text in settings.items():
        if key in WARM_UP_KEYS:  # read by warm_up_boards
            continue
        if _sort_out(key, text, mapped):
            continue
        if key == "maxVisits":
            mapped.options["visits"] = _integer(key, text, 1, MAX_VISITS)
        elif key == "maxTime":
            seconds = _number(key, text, 0.0, 1e20)
            mapped.options["max_time"] = math.inf if seconds >= 1e20 else seconds
        elif key == "analysisPVLen":
            mapped.options["pv_length"] = _integer(key, text, 1, 100)
        elif key == "reportAnalysisWinratesAs":
            if text not in REPORT_AS:
                raise ConfigError(f"KataGo config: {key} must be one of {'|'.join(REPORT_AS)}")
            mapped.options["report_as"] = text
        elif key == "ignorePreRootHistory":
            mapped.options["ignore_pre_root_history"] = _boolean(key, text)
        elif key in KATAGO_SEARCH_SWITCHES:
            mapped.options[KATAGO_SEARCH_SWITCHES[key]] = _boolean(key, text)
        elif key in KATAGO_SEARCH_FIELDS:
            setting = KATAGO_SEARCH_FIELDS[key]
            value = _number(key, text, setting.low, setting.high)
            if search not in setting.kinds:
                mapped.not_supported(key, "needs --search katago")
            elif key == "wideRootNoise":
                mapped.options["wide_root_noise"] = value
            else:
                fields[setting.field] = value
        else:
            mapped.not_supported(key)
    if fields:
        mapped.options["search_settings"] = fields
    return mapped


# ----------------------------------------------------------------------------
# What gojax analysis compiles before it says it is ready

# gojax's own key (KataGo's analysis engine has no warm-up; KataGo warns about an unknown
# key and goes on): the boards to compile ahead, as --warm-up names them, or "none". For
# KaTrain's "local" back end, whose command line cannot be changed, the config file is
# the place to say so.
WARM_UP_KEY = "gojaxWarmUp"
WARM_UP_KEYS = (
    WARM_UP_KEY,
    "maxBoardXSizeForNNBuffer",
    "maxBoardYSizeForNNBuffer",
    "requireMaxBoardSize",
)
# A KataGo analysis config names no board size nor rules (each query does). KaTrain,
# the client that starts gojax with one, opens on 19x19 and offers 9x9 as the other
# quick board; its default rules, and what it sends for rules it does not know, are
# japanese. Other sizes and rules compile on their first query.
WARM_UP_SIZES = (19, 9)
WARM_UP_RULES = "japanese"


def parse_boards(text: str) -> list[tuple[int, str]]:
    """``SIZE[:RULES],...`` (rules: any KataGo name, default chinese) as ``(size, rules)``
    pairs; ``none`` (or nothing) is none. ValueError naming the entry that is not one."""
    from eval.analysis_query import QueryError, parse_rules

    if text.strip().lower() == "none":
        return []
    chosen = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        size, _, rules = entry.partition(":")
        try:
            parse_rules(rules or "chinese")
            number = int(size)
        except (QueryError, ValueError):
            number = 0
        if not 2 <= number <= 25:
            raise ValueError(f"expected SIZE[:RULES],... (sizes 2 to 25) or none, got {entry!r}")
        chosen.append((number, rules or "chinese"))
    return chosen


def warm_up_boards(settings: dict[str, str]) -> list[tuple[int, str]]:
    """The boards ``gojax analysis`` compiles ahead for a KataGo config's ``settings``:
    its ``gojaxWarmUp`` if it has one; else 19x19 and 9x9 with japanese rules (KaTrain's,
    ``WARM_UP_SIZES``, ``WARM_UP_RULES``), only those within KataGo's
    ``maxBoardXSizeForNNBuffer`` and ``maxBoardYSizeForNNBuffer`` (the largest board it
    takes; if neither fits, that size), and with ``requireMaxBoardSize`` that size alone
    (KataGo's only board then). ConfigError for a value KataGo, or gojax, would refuse."""
    if WARM_UP_KEY in settings:
        try:
            return parse_boards(settings[WARM_UP_KEY])
        except ValueError as err:
            raise ConfigError(f"KataGo config: key {WARM_UP_KEY}: {err}") from None
    largest = min(
        _integer(key, settings.get(key, "19"), 2, 37)  # KataGo's default: 19
        for key in ("maxBoardXSizeForNNBuffer", "maxBoardYSizeForNNBuffer")
    )
    if _boolean("requireMaxBoardSize", settings.get("requireMaxBoardSize", "false")):
        sizes = [largest]
    else:
        sizes = [size for size in WARM_UP_SIZES if size <= largest] or [largest]
    return [(size, WARM_UP_RULES) for size in sizes if size <= 25]  # gojax's largest


def gtp_options(settings: dict[str, str]) -> Mapped:
    """``gojax gtp``'s flags (``visits``, ``rules``, ``lag``, ``resign_threshold``) and
    KataGo parameters (``kata-set-params``, ``eval.gtp_params``) from a KataGo GTP
    config's ``settings``. Which parameters the player honours is known only once it
    is made: :func:`gtp_parameters` sorts them out then."""
    from eval.analysis_query import MAX_TREE_VISITS
    from eval.gtp_params import PARAMS

    mapped = Mapped()
    rules = {key: settings[key] for key in _RULE_KEYS if key in settings}
    for key, text in settings.items():
        if key in rules or _sort_out(key, text, mapped):
            continue
        if key in ("maxVisits", "maxVisitsPondering"):
            visits = _integer(key, text, 1, 1 << 50)
            if visits > MAX_TREE_VISITS:  # the most one search tree holds here
                mapped.not_supported(f"{key} above {MAX_TREE_VISITS}", f"{MAX_TREE_VISITS} used")
                visits = MAX_TREE_VISITS
            if key == "maxVisits":  # the player, search or policy, follows the budget
                mapped.options["visits"] = max(1, visits - 1)
            else:
                mapped.settings[key] = str(visits)
        elif key == "rules":
            mapped.options["rules"] = _rules(text, mapped)
        elif key == "lagBuffer":
            mapped.options["lag"] = _number(key, text, 0.0, 1e6)
        elif key == "resignThreshold":  # KataGo's on the utility, -1 to 1
            if _boolean("allowResignation", settings.get("allowResignation", "false")):
                utility = _number(key, text, -1.0, 1.0)
                mapped.options["resign_threshold"] = (1.0 + utility) / 2.0
        elif key == "ignorePreRootHistory":  # a genmove's: KataGo's default false
            if _boolean(key, text):
                mapped.not_supported(key, "a genmove's network sees the game")
        elif key in PARAMS:
            mapped.settings[key] = text
        else:
            mapped.not_supported(key)
    if rules:
        fields: dict[str, Any] = {}
        for key, name in (("koRule", "ko"), ("scoringRule", "scoring"), ("taxRule", "tax")):
            if key in rules:
                fields[name] = rules[key].upper()
        for key, name in (("multiStoneSuicideLegal", "suicide"), ("hasButton", "hasButton")):
            if key in rules:
                fields[name] = _boolean(key, rules[key])
        if "whiteHandicapBonus" in rules:
            fields["whiteHandicapBonus"] = rules["whiteHandicapBonus"]
        try:
            mapped.options["rules"] = _rules(fields, mapped)
        except ConfigError as err:  # the key's name, not the JSON gojax built from them
            raise ConfigError(f"KataGo config: rules {rules} not recognised") from err
    return mapped


def _rules(value: Any, mapped: Mapped) -> str:
    """A KataGo rule name or rules object as a gojax preset; rules no preset has are
    replaced by the nearest (``eval.analysis_query.parse_rules``), noted as unsupported."""
    from eval.analysis_query import QueryError, parse_rules

    try:
        preset, _, _, warning = parse_rules(value)
    except QueryError as err:
        raise ConfigError(f"KataGo config: {err.message}") from None
    if warning:
        mapped.not_supported("rules", warning)
    return preset


def gtp_parameters(mapped: Mapped, honoured: list[str]) -> dict[str, str]:
    """The parameters of ``mapped.settings`` the engine honours (``honoured``:
    ``eval.gtp_params.names``); the others are noted as not for this player."""
    kept = {}
    for key, text in mapped.settings.items():
        if key in honoured:
            kept[key] = text
        else:
            mapped.not_supported(key, "not for this player")
    return kept


def ignored_line(command: str, path: str | None, mapped: Mapped) -> str | None:
    """The one stderr line naming what of a KataGo config gojax does not use, or None."""
    parts = []
    if mapped.no_effect:
        parts.append(
            f"{', '.join(mapped.no_effect)} (threads, batches, caches, devices, logs: "
            "nothing to do here)"
        )
    if mapped.unsupported:
        parts.append(f"not supported: {', '.join(mapped.unsupported)}")
    if not parts:
        return None
    source = f"KataGo config {path}" if path else "KataGo -override-config"
    return f"gojax {command}: {source}: ignored {'; '.join(parts)}"


def add_katago_arguments(parser: argparse.ArgumentParser) -> None:
    """KataGo's ``-config FILE``, ``-override-config KEY=VALUE,...`` and ``-human-model``
    (``gojax analysis`` and ``gojax gtp``): a client set up for the ``katago``
    executable starts gojax with KataGo's command line (``eval.katago_config``)."""
    parser.add_argument(
        "-config",
        "--config",
        dest="config",
        default=None,
        metavar="FILE",
        help="a KataGo config file: the keys gojax has set what the flags left at their "
        "defaults; the others are named once on stderr",
    )
    parser.add_argument(
        "-override-config",
        dest="katago_overrides",
        action="append",
        default=None,
        metavar="KEY=VALUE,...",
        help="KataGo's: config keys over -config's (may be repeated; an empty value drops a key)",
    )
    parser.add_argument(
        "-human-model",
        dest="human_model",
        default=None,
        metavar="FILE",
        help="KataGo's human SL model (not supported: named once on stderr and ignored)",
    )
