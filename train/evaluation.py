"""The training loop's view of the arena (``train.arena``): the same agents and games.

Kept for the names the loop and its tests import; everything but
:func:`search_agent`'s signature is ``train.arena``'s and ``train.agents``'.
An agent is a ``train.arena.Agent`` (a jittable policy over ``[B]`` states
with one key per game, plus its parameters)::

    net = search_agent(spec, module, variables, SearchConfig(num_simulations=32))
    result = play_arena(net, random_agent(), key, size=9, num_games=64)
    result.summary()  # {"games": 64, "wins": ..., "win_rate": ..., "ci95": (lo, hi)}
"""

from __future__ import annotations

from typing import Any

from gojax.search import SearchConfig
from train import agents
from train.agents import capture_agent, random_agent, uct_agent
from train.arena import GAMES_AXIS, Agent, ArenaResult, play_arena, wilson_interval
from train.model import ModelSpec

__all__ = [
    "GAMES_AXIS",
    "ArenaResult",
    "Agent",
    "capture_agent",
    "play_arena",
    "random_agent",
    "search_agent",
    "uct_agent",
    "wilson_interval",
]


def search_agent(spec: ModelSpec, module: Any, variables: Any, config: SearchConfig) -> Agent:
    """A net (``train.model.evaluator``) with ``gojax.search`` under ``config``.

    ``module`` is accepted for the loop's call and unused: the arena builds
    the module of ``spec`` once, and the variables are traced, so every
    checkpoint of one net shares the compiled arena.
    """
    del module
    return agents.search_agent(spec, variables, config)
