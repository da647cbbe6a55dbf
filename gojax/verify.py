"""Checks of gojax against another engine's records: the rules, and a network's outputs.

The public home of ``gojax._verify`` (our legal sets and final counts against
games KataGo recorded: ``gojax verify-rules``) and ``gojax._verify_net`` (a
network's outputs against KataGo's ``kata-raw-nn`` numbers for the same
positions: ``gojax verify-net``). Their module docstrings describe the file
formats.
"""

from __future__ import annotations

from gojax._verify import GameCheck, check_game, read_games, verify_rules_file
from gojax._verify_net import NetCheck, Worst, verify_net_file

__all__ = [
    "GameCheck",
    "NetCheck",
    "Worst",
    "check_game",
    "read_games",
    "verify_net_file",
    "verify_rules_file",
]
