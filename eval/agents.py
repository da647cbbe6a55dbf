"""Players for the arena: JAX agents (random, capture, network search, UCT) and GTP programs.

The JAX agents are ``train.agents``' (an :class:`Agent`, ``train.arena``'s, is a
static ``policy(params, states [B], keys [B]) -> (actions [B] int32, values [B]
float32)`` and its ``params``), re-exported here so that evaluation code finds
every kind of player in one place. A :class:`GTPAgent` names a program that
speaks GTP (GnuGo, KataGo, ...); ``eval.arena.play_games`` plays it move by move.
"""

from __future__ import annotations

import dataclasses
import shutil

from train.agents import capture_agent, random_agent, search_agent, uct_agent
from train.arena import Agent, Policy

__all__ = [
    "Agent",
    "GTPAgent",
    "Policy",
    "capture_agent",
    "gnugo_agent",
    "random_agent",
    "search_agent",
    "uct_agent",
]


@dataclasses.dataclass(frozen=True)
class GTPAgent:
    """A player behind GTP: a program started with ``command`` (GnuGo, KataGo, ...)."""

    command: str | tuple[str, ...]
    name: str


def gnugo_agent(level: int = 10, *, command: str | None = None) -> GTPAgent:
    """GnuGo at ``level`` (0..10) over GTP; ``command`` defaults to ``gnugo`` on the PATH
    or in /usr/games (where Debian's package puts it)."""
    if not 0 <= int(level) <= 10:
        raise ValueError(f"GnuGo levels are 0..10, not {level}")
    program = command or shutil.which("gnugo") or shutil.which("gnugo", path="/usr/games")
    if program is None:
        raise ValueError("gnugo is not installed (Debian/Ubuntu: apt-get install gnugo)")
    return GTPAgent((program, "--mode", "gtp", "--level", str(int(level))), f"gnugo-{level}")
