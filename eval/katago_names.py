"""KataGo's names for the settings of gojax's KataGo search.

KataGo's GTP engine (``kata-set-param``) and analysis engine
(``overrideSettings``) change its search by these names; both front ends
read them from this table: KataGo's parameter -> ``(SearchConfig`` field,
lowest, highest``)``, with KataGo's ranges. They apply to
``SearchConfig(kind="katago")`` only.
"""

from __future__ import annotations

from gojax.search import KATAGO_PUCT_RANGES

KATAGO_SEARCH_FIELDS: dict[str, tuple[str, float, float]] = {
    "staticScoreUtilityFactor": ("static_score_utility", 0.0, 1.0),
    "dynamicScoreUtilityFactor": ("dynamic_score_utility", 0.0, 1.0),
    **{
        name: (field, *KATAGO_PUCT_RANGES[field])
        for name, field in (
            ("cpuctExploration", "cpuct_exploration"),
            ("cpuctExplorationLog", "cpuct_exploration_log"),
            ("cpuctExplorationBase", "cpuct_exploration_base"),
            ("cpuctUtilityStdevScale", "cpuct_utility_stdev_scale"),
            ("fpuReductionMax", "fpu_reduction"),
            ("rootFpuReductionMax", "root_fpu_reduction"),
        )
    },
}
