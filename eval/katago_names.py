"""KataGo's names for the settings of gojax's searches.

KataGo's GTP engine (``kata-set-param``) and analysis engine
(``overrideSettings``) change its search by these names; both front ends
read them from this table: KataGo's parameter -> :class:`SearchSetting`
(the ``SearchConfig`` field, KataGo's range, and the search kinds it applies
to).
"""

from __future__ import annotations

from typing import NamedTuple

from gojax.search import KATAGO_PUCT_RANGES, ROOT_TEMPERATURE_RANGE, TEMPERATURE_HALFLIFE_RANGE


class SearchSetting(NamedTuple):
    """One of KataGo's search parameters as a ``SearchConfig`` field."""

    field: str
    low: float  # KataGo's range
    high: float
    kinds: tuple[str, ...]  # the SearchConfig kinds that honour it


# KataGo's wideRootNoise in its analysis engine and GTP analysis commands (its
# DEFAULT_ANALYSIS_WIDE_ROOT_NOISE); its moves are searched with none.
ANALYSIS_WIDE_ROOT_NOISE = 0.04

_KATAGO_ONLY = ("katago",)
# The root policy temperature tempers the prior of any PUCT search.
_PUCTS = ("puct", "katago")

KATAGO_SEARCH_FIELDS: dict[str, SearchSetting] = {
    "staticScoreUtilityFactor": SearchSetting("static_score_utility", 0.0, 1.0, _KATAGO_ONLY),
    "dynamicScoreUtilityFactor": SearchSetting("dynamic_score_utility", 0.0, 1.0, _KATAGO_ONLY),
    **{
        name: SearchSetting(field, *KATAGO_PUCT_RANGES[field], _KATAGO_ONLY)
        for name, field in (
            ("cpuctExploration", "cpuct_exploration"),
            ("cpuctExplorationLog", "cpuct_exploration_log"),
            ("cpuctExplorationBase", "cpuct_exploration_base"),
            ("cpuctUtilityStdevScale", "cpuct_utility_stdev_scale"),
            ("fpuReductionMax", "fpu_reduction"),
            ("rootFpuReductionMax", "root_fpu_reduction"),
            ("wideRootNoise", "wide_root_noise"),
        )
    },
    "rootPolicyTemperature": SearchSetting(
        "root_policy_temperature", *ROOT_TEMPERATURE_RANGE, _PUCTS
    ),
    "rootPolicyTemperatureEarly": SearchSetting(
        "root_policy_temperature_early", *ROOT_TEMPERATURE_RANGE, _PUCTS
    ),
    # How fast the early temperatures give way to the late ones.
    "chosenMoveTemperatureHalflife": SearchSetting(
        "temperature_halflife", *TEMPERATURE_HALFLIFE_RANGE, _PUCTS
    ),
}

# KataGo's true/false search parameters -> the SearchConfig field (every kind honours them).
KATAGO_SEARCH_SWITCHES: dict[str, str] = {
    # At a symmetric root, search one move of each set of equivalent moves (KataGo's GTP
    # and analysis engines: true).
    "rootSymmetryPruning": "root_symmetry_pruning",
}
