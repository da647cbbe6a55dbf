"""The settings a network player of :mod:`eval.players` is built with, worked out from
its net and flags: KataGo's policy optimism (:func:`policy_optimism`, the modules it
searches with, the name's label), whether a search weighs the score
(:func:`score_utility_settings`) and Gumbel's root moves (:func:`auto_considered`).
Apart from the players because the command lines and the analysis engine check and
resolve them too, before any player exists.
"""

from __future__ import annotations

from typing import Any

from gojax.evaluate import KATAGO_POLICY_OPTIMISM, KATAGO_ROOT_POLICY_OPTIMISM


def has_optimistic_policy(model: Any) -> bool:
    """Whether ``model`` (a ``KataGoModel``, or any player's model) has KataGo's
    optimistic policy head."""
    return bool(getattr(getattr(model, "config", None), "optimistic_policy", False))


def policy_optimism(
    model: Any, root: float | None = None, below: float | None = None
) -> tuple[float, float]:
    """``(root, below)`` policy optimism for searching with ``model``: KataGo's defaults
    (0.2, 1.0) for a net with an optimistic policy and (0, 0) for others where a value is
    None. A value outside [0, 1], or a non-zero one for a net without the head, is a
    ``ValueError``."""
    optimistic = has_optimistic_policy(model)
    defaults = (KATAGO_ROOT_POLICY_OPTIMISM, KATAGO_POLICY_OPTIMISM) if optimistic else (0, 0)
    root = float(defaults[0] if root is None else root)
    below = float(defaults[1] if below is None else below)
    for name, value in (("root policy optimism", root), ("policy optimism", below)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], not {value:g}")
        if value and not optimistic:
            raise ValueError(
                f"{name} needs a net with KataGo's optimistic policy (model version >= 12); "
                f"{getattr(model, 'name', 'this net')} has none"
            )
    return root, below


def optimism_modules(model: Any, optimism: tuple[float, float]) -> tuple[Any, Any]:
    """``(net, root_net)`` for searching with ``(root, below)`` policy optimism: the module
    of every node below the root, and the root's, or None when the root's is the same."""
    root, below = optimism
    net = model.module(policy_optimism=below)
    return net, (None if root == below else model.module(policy_optimism=root))


def optimism_label(optimism: tuple[float, float]) -> str:
    """``", policy optimism ROOT/BELOW"`` for names, or ``""`` when both are 0."""
    return f", policy optimism {optimism[0]:g}/{optimism[1]:g}" if any(optimism) else ""


def score_utility_settings(search: str, score_utility: bool) -> dict[str, float]:
    """``SearchConfig`` fields for a search that weighs the score (KataGo's weights, the
    defaults) or not; only ``search="katago"`` weighs it, so only it can turn it off."""
    if score_utility:
        return {}
    if search != "katago":
        raise ValueError("only the katago search weighs scores: nothing to turn off")
    return {"static_score_utility": 0.0, "dynamic_score_utility": 0.0}


# The SearchConfig fields of a player's LCB move (``lcb=True``): KataGo's bound, 3 standard
# errors below the mean (KataGo's 5 rarely overrules the visits at play's budgets) with a
# spread of at least KataGo's prior stdev (0.4): a move's first few visits often agree and
# would claim a certainty they do not have. On 9x9 positions of the reference games,
# b6c96, 64 visits, regret to a 1,600-visit search's utilities: 0.040 with these
# against 0.042 by visits and 0.044 by KataGo's own bound; with K = 8 leaves a step
# (virtual loss spreads the visits): 0.043, 0.051 and 0.048.
PLAY_LCB = {"lcb_selection": True, "lcb_stdevs": 3.0, "lcb_stdev_floor": 0.4}


def auto_considered(visits: int) -> int:
    """Root moves for Gumbel's sequential halving in play: a quarter of the visits, 2 to 16.

    With no more visits than candidates every visit goes to a different root
    move and none deeper; against PUCT with the reference net, a quarter of the
    visits won 55-70% at 8-32 visits where 16 candidates won about 30%
    (docs/papers/alphago.md).
    """
    return min(16, max(2, int(visits) // 4))
