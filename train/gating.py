"""Gating: does a new network replace the best one? AlphaGo Zero's 55% rule.

AlphaGo Zero (Silver et al. 2017) evaluated each checkpoint against the
current best player over 400 games and promoted it only if it won more than
55% of them, so that the self-play data come from a player that is better and
not just luckier. :func:`gate` is that rule over :func:`train.arena.play_arena`
(the training loop's gate, ``--config.gating.every_iterations``)::

    result = gate(candidate, best, key, num_games=400, size=19, komi=7.5)
    if result.promoted:
        best = candidate

Draws count half. ``ci95`` is the Wilson interval of the win rate, for a
caller who wants significance as well (``result.ci95[0] > 0.5``).
``eval.gating.gate`` is the same rule for any two players, GTP programs too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from train.arena import Agent, ArenaResult, play_arena

__all__ = ["GateResult", "check_threshold", "decide", "gate"]


@dataclasses.dataclass(frozen=True)
class GateResult:
    """The candidate's games against the best player and the decision."""

    promoted: bool  # win_rate > threshold
    win_rate: float  # the candidate's, draws half
    ci95: tuple[float, float]  # Wilson interval of win_rate
    games: int
    wins: int
    draws: int
    losses: int
    threshold: float
    result: ArenaResult  # the games, from the candidate's view


def check_threshold(threshold: float) -> None:
    """Raise ValueError unless ``threshold`` is in (0, 1)."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")


def decide(result: ArenaResult, threshold: float) -> GateResult:
    """The gate's decision on the candidate's games ``result`` (the candidate is agent A)."""
    summary = result.summary()
    return GateResult(
        promoted=summary["win_rate"] > threshold,
        win_rate=summary["win_rate"],
        ci95=summary["ci95"],
        games=summary["games"],
        wins=summary["wins"],
        draws=summary["draws"],
        losses=summary["losses"],
        threshold=threshold,
        result=result,
    )


def gate(
    candidate: Agent,
    best: Agent,
    key: jax.Array,
    num_games: int,
    threshold: float = 0.55,
    **arena: Any,
) -> GateResult:
    """Play ``num_games`` games, colours alternating; promote if the candidate wins > ``threshold``.

    Args:
      candidate, best: the two JAX agents (the candidate is agent A).
      key: PRNG key (fixes the games).
      num_games: games to play (AlphaGo Zero: 400); an even number balances colours.
      threshold: the win rate to beat (strictly), in (0, 1).
      **arena: the game and arena settings of :func:`train.arena.play_arena`:
        ``size`` (required), ``komi``, ``rules``, ``max_moves``,
        ``opening_moves``, ``resign_threshold``, ``batch_size``, ``mesh``,
        ``sgf_dir``.
    """
    check_threshold(threshold)
    return decide(play_arena(candidate, best, key, num_games=num_games, **arena), threshold)
