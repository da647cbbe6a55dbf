"""Move choosers for the GTP engine: one interface, several ways to pick a move.

A player looks at one position and returns an :class:`Analysis`: the
candidate moves with their visits, win rates, score leads, priors, lower
confidence bounds and principal variations, plus the root's win rate, score
and ownership. ``genmove`` plays the candidate of ``order`` 0; the analysis
commands (``lz-analyze``, ``kata-analyze``) print the list.

Every number is from the view of the player to move at the root (KataGo's
``SIDETOMOVE`` convention, what Lizzie and Sabaki expect).

* :class:`PolicyPlayer`: the raw network policy, one evaluation, no search.
* :class:`SearchPlayer`: tree search (``gojax.search``) with a visit budget,
  an optional deadline, and tree reuse between moves when search offers it.
* :class:`UniformPlayer`: uniform priors and a random legal move, no network;
  for protocol tests and as a sparring partner.
* :class:`UCTPlayer`: classical UCT with random rollouts, no network.

The pieces live in private modules, this one is the entry point that names them:
``eval._players_analysis`` (:class:`Analysis`, :class:`Player` and the helpers every
player shares), ``eval._players_settings`` (policy optimism, score utility, Gumbel's
root moves), ``eval._players_oneshot`` (the policy and uniform players),
``eval._players_search`` (the search player and its jitted functions),
``eval._players_search_analysis`` (a finished search read as an analysis) and
``eval._players_uct`` (the UCT player).
"""

from eval._players_analysis import (
    Analysis,
    MoveInfo,
    Player,
    Progress,
    keep_out,
    knows_ownership,
    model_info,
    raw_errors,
    root_moves,
)
from eval._players_analysis import _live as _live
from eval._players_analysis import _policy_analysis as _policy_analysis
from eval._players_oneshot import PolicyPlayer, UniformPlayer
from eval._players_search import (
    PONDER_FACTOR,
    PONDER_LEAST,
    PONDER_PARTS,
    SEARCH_KINDS,
    STOPPABLE_PARTS,
    SearchPlayer,
)
from eval._players_search import _search_functions as _search_functions
from eval._players_search_analysis import listed_actions, pv_visits, search_analysis
from eval._players_settings import (
    PLAY_LCB,
    auto_considered,
    has_optimistic_policy,
    optimism_label,
    optimism_modules,
    policy_optimism,
    score_utility_settings,
)
from eval._players_uct import UCTPlayer
from gojax.evaluate import KATAGO_POLICY_OPTIMISM, KATAGO_ROOT_POLICY_OPTIMISM

__all__ = [
    "KATAGO_POLICY_OPTIMISM",
    "KATAGO_ROOT_POLICY_OPTIMISM",
    "PLAY_LCB",
    "PONDER_FACTOR",
    "PONDER_LEAST",
    "PONDER_PARTS",
    "SEARCH_KINDS",
    "STOPPABLE_PARTS",
    "Analysis",
    "MoveInfo",
    "Player",
    "PolicyPlayer",
    "Progress",
    "SearchPlayer",
    "UCTPlayer",
    "UniformPlayer",
    "auto_considered",
    "has_optimistic_policy",
    "keep_out",
    "knows_ownership",
    "listed_actions",
    "model_info",
    "optimism_label",
    "optimism_modules",
    "policy_optimism",
    "pv_visits",
    "raw_errors",
    "root_moves",
    "score_utility_settings",
    "search_analysis",
]
