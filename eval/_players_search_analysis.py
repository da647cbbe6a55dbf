"""A finished search read as an :class:`eval.players.Analysis`: the root moves to list
(:func:`listed_actions`), their numbers, principal variations and the visits along
them, KataGo's bounds, the tree's ownership and score spread, and the moves a
symmetric root stands for (:func:`search_analysis`). Apart from the search player
because the analysis engine reads its batched searches the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from eval._players_analysis import Analysis, MoveInfo, _finite, raw_errors


def listed_actions(host: Any, index: int, max_listed: int) -> list[int]:
    """The root moves to report for game ``index`` of a host-side ``SearchOutput``.

    The chosen move first, then the other visited moves by visits (ties: the
    higher prior), at most ``max_listed``.
    """
    visits = host.visit_counts[index]
    prior = np.asarray(jax.nn.softmax(host.tree.children_prior_logits[index, 0]))
    chosen = int(host.action[index])
    visited = [int(a) for a in np.lexsort((prior, visits)) if visits[a] > 0][::-1]
    return ([chosen] + [a for a in visited if a != chosen])[:max_listed]


def pv_visits(tree: Any, index: int, pv: tuple[int, ...]) -> tuple[int, ...]:
    """Visits of the edges along ``pv`` from the root of game ``index`` of a host tree."""
    visits, node = [], 0
    for action in pv:
        if node < 0:
            break
        visits.append(int(tree.children_visits[index, node, action]))
        node = int(tree.children_index[index, node, action])
    return tuple(visits)


def search_analysis(
    host: Any,
    index: int,
    listed: list[int],
    out: dict[str, np.ndarray],
    mover: int,
    *,
    pv_length: int = 24,
) -> Analysis:
    """The :class:`Analysis` of game ``index`` of a host-side ``SearchOutput``.

    Win rates, utilities and scores (the root's and each visited move's) are the
    search's means, as KataGo reports them; ``lcb`` and ``utility_lcb`` are KataGo's
    bounds on them. So is the root's ownership when the search kept its nodes'
    (``host.ownership``); otherwise it is the root's own evaluation (``out``). A move
    never searched takes the network's numbers after it.

    Args:
      host: ``jax.device_get`` of a ``gojax.search.SearchOutput`` (its tree
        needs the fields ``principal_variation`` reads, the root's prior logits and the
        nodes' players, ``embeddings.to_play``).
      listed: the root moves to report, from :func:`listed_actions`.
      out: network outputs of the root (row 0) and of the position after each
        listed move (row ``1 + i``): ``[1 + K, ...]`` arrays, ``K >= len(listed)``.
      mover: the player to move at the root, +1 black, -1 white.
      pv_length: longest principal variation, first move included.
    """
    from gojax.search import (
        lower_confidence_bounds,
        principal_variation,
        subtree_score_distributions,
    )

    visits = host.visit_counts[index]
    prior = np.asarray(jax.nn.softmax(host.tree.children_prior_logits[index, 0]))
    winrates = (np.clip(host.q_values[index], -1.0, 1.0) + 1.0) / 2.0
    utilities, q_stdev = (np.asarray(x[index], np.float64) for x in (host.utilities, host.q_stdev))
    radius = float(host.utility_radius[index])
    # KataGo's bound on the utility, and the win rate less its radius scaled by the value's
    # share of the utility (KataGo's "hacked" lcb, on the win-rate scale); 0 without visits,
    # as Leela Zero.
    utility_bounds = lower_confidence_bounds(utilities, visits, q_stdev, radius=radius)
    bounds = winrates - (utilities - utility_bounds) / (2.0 * radius)
    bounds = np.where(visits > 0, np.clip(bounds, 0.0, 1.0), 0.0)
    # The score distributions below the root (row 0) and each listed move, where the
    # network gives one; else (nets without a score head, UCT) each position's own.
    distributed = float(out["score_stdev"][0]) > 0
    if distributed:
        selfplay, spread = subtree_score_distributions(host.tree, index, listed)
    own_selfplay = out["white_score_selfplay"] * -mover

    def lead(i: int, a: int) -> float:  # the mover's lead after listed move i, action a
        if visits[a] > 0:  # the search's mean (0 for nets without a score head, and UCT)
            return _finite(float(host.score_values[index, a]))
        return _finite(float(out["white_lead"][1 + i]) * -mover)

    def score(row: int) -> tuple[float, float]:  # (scoreSelfplay, scoreStdev) of a row
        if distributed and np.isfinite(selfplay[row]):
            return _finite(float(selfplay[row])), _finite(float(spread[row]))
        return _finite(float(own_selfplay[row])), _finite(float(out["score_stdev"][row]))

    scores = [score(1 + i) for i in range(len(listed))]
    moves = tuple(
        MoveInfo(
            action=a,
            visits=int(visits[a]),
            winrate=float(winrates[a]),
            score_lead=lead(i, a),
            prior=float(prior[a]),
            lcb=float(bounds[a]),
            order=i,
            pv=(pv := tuple(principal_variation(host.tree, index, a, pv_length))),
            pv_visits=pv_visits(host.tree, index, pv),
            no_result=float(out["no_result"][1 + i]),
            utility=float(utilities[a]) if visits[a] > 0 else 2.0 * float(winrates[a]) - 1.0,
            utility_lcb=float(utility_bounds[a]),
            score_selfplay=scores[i][0],
            score_stdev=scores[i][1],
        )
        for i, a in enumerate(listed)
    )
    root_value = float(np.clip(host.root_value[index], -1.0, 1.0))
    # The tree's mean ownership where the search kept it (KataGo's), else the root's own.
    tracked = host.ownership.shape[-1] > 0
    nodes_tracked = host.tree.raw_ownership.shape[-1] > 0

    @functools.cache
    def moves_ownership() -> tuple[np.ndarray, np.ndarray]:
        from gojax.search import subtree_ownership

        means, stdevs = subtree_ownership(host.tree, index, listed)  # Black's view
        # A move never searched: the network's view of the position after it.
        after = -out["white_ownership"][1 : 1 + len(listed)]
        searched = np.all(np.isfinite(means), axis=1, keepdims=True)
        means = np.where(searched, means, after) * mover
        stdevs = np.where(searched, stdevs, 0.0)
        return means.astype(np.float32), stdevs.astype(np.float32)

    root_ownership = host.ownership[index] if tracked else -out["white_ownership"][0]
    root_selfplay, root_spread = score(0)
    symmetries = np.asarray(host.root_symmetries[index])
    if symmetries[1:].any():  # a symmetric root: every move the searched ones stand for
        moves, moves_ownership = _symmetric_copies(
            moves, moves_ownership, symmetries, host.tree.children_prior_logits[index, 0]
        )
    return Analysis(
        moves=moves,
        visits=int(visits.sum()) + 1,
        winrate=(root_value + 1.0) / 2.0,
        score_lead=_finite(float(host.root_score[index])),
        score_stdev=root_spread,
        ownership=(root_ownership * mover).astype(np.float32),
        ownership_stdev=host.ownership_stdev[index] if tracked else None,
        moves_ownership=moves_ownership if nodes_tracked else None,
        utility=_finite(float(host.root_utility[index])),
        score_selfplay=root_selfplay,
        raw_errors=raw_errors(out),
    )


def _symmetric_copies(
    moves: tuple[MoveInfo, ...],
    moves_ownership: Callable[[], tuple[np.ndarray, np.ndarray]],
    symmetries: np.ndarray,
    root_logits: np.ndarray,
) -> tuple[tuple[MoveInfo, ...], Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """``moves`` of a root that the board ``symmetries [8]`` leave unchanged, each
    followed by the moves equivalent to it (its images, with its numbers, its
    principal variation carried over and ``symmetry_of`` set), each move once and none
    the root kept out (``root_logits [A]`` illegal), as KataGo lists them; and their
    ``moves_ownership``, each copy's map carried over likewise."""
    from gojax.search import (
        ILLEGAL_THRESHOLD,
        symmetric_moves,
        transform_actions,
        transform_point_values,
    )

    size = math.isqrt(len(root_logits) - 1)
    allowed = np.asarray(root_logits) > ILLEGAL_THRESHOLD
    copies: list[tuple[int, int, MoveInfo]] = []  # (searched move's index, symmetry, copy)
    done: set[int] = set()
    for k, info in enumerate(moves):
        for symmetry, image in symmetric_moves(info.action, size, symmetries):
            if image in done or not allowed[image]:
                continue
            done.add(image)
            copy = dataclasses.replace(
                info,
                action=image,
                order=len(copies),
                pv=transform_actions(info.pv, size, symmetry),
                symmetry_of=info.action if symmetry else None,
            )
            copies.append((k, symmetry, copy))

    @functools.cache
    def copied_ownership() -> tuple[np.ndarray, np.ndarray]:
        means, stdevs = moves_ownership()
        pairs = [
            (transform_point_values(means[k], size, s), transform_point_values(stdevs[k], size, s))
            for k, s, _ in copies
        ]
        return np.stack([m for m, _ in pairs]), np.stack([d for _, d in pairs])

    return tuple(c for _, _, c in copies), copied_ownership
