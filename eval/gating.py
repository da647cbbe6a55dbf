"""Gating for any two players: AlphaGo Zero's 55% rule (``train.gating``) over
:func:`eval.arena.play_games`, so that a GTP program (GnuGo, KataGo) may be the
candidate or the best player::

    result = gate(candidate, best, key, num_games=400, size=19, komi=7.5)
    if result.promoted:
        best = candidate

Two JAX agents play the batched arena, as ``train.gating.gate`` plays them.
Draws count half. ``ci95`` is the Wilson interval of the win rate, for a
caller who wants significance as well (``result.ci95[0] > 0.5``).
"""

from __future__ import annotations

from typing import Any

import jax

from eval.arena import Agent, GTPAgent, play_games
from train.gating import GateResult, check_threshold, decide

__all__ = ["GateResult", "gate"]


def gate(
    candidate: Agent | GTPAgent,
    best: Agent | GTPAgent,
    key: jax.Array,
    num_games: int,
    threshold: float = 0.55,
    **arena: Any,
) -> GateResult:
    """Play ``num_games`` games, colours alternating; promote if the candidate wins > ``threshold``.

    Args:
      candidate, best: the two agents (the candidate is agent A).
      key: PRNG key (fixes the games).
      num_games: games to play (AlphaGo Zero: 400); an even number balances colours.
      threshold: the win rate to beat (strictly), in (0, 1).
      **arena: the game and arena settings of :func:`eval.arena.play_games`:
        ``size`` (required), ``komi``, ``rules``, ``max_moves``,
        ``opening_moves``, ``resign_threshold``, ``batch_size``, ``mesh``,
        ``sgf_dir``.
    """
    check_threshold(threshold)
    return decide(play_games(candidate, best, key, num_games=num_games, **arena), threshold)
