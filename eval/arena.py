"""The arena: many games between two agents as one jitted program, or move by move over GTP.

:func:`play_games` is the evaluation's front: two JAX agents (``train.agents``:
random, capture, network search, UCT; an :class:`Agent` is ``train.arena``'s)
play batched in ``train.arena.play_arena``, as the training loop's evaluations
and gating do; if either is a :class:`GTPAgent` (GnuGo, KataGo, any GTP
program) the games go move by move through ``eval.match.run_match``, the JAX
agent then playing as an in-process GTP engine with the same per-game keys::

    net = search_agent(spec, variables, SearchConfig(num_simulations=32, temperature_moves=0,
                                                     dirichlet_fraction=0.0))
    result = play_games(net, gnugo_agent(10), key, size=9, num_games=64, sgf_dir="games")
    result.summary()  # {"games": 64, "wins": ..., "win_rate": ..., "ci95": (lo, hi), ...}

The batched arena's names (:func:`play_arena`, :class:`ArenaResult`, the
agents) are re-exported here, so that evaluation code imports every piece
from one module. ``train.arena``'s docstring describes colours, openings,
reproducibility and cost.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh

import gojax
from eval.agents import GTPAgent, gnugo_agent
from eval.gtp_client import GTPCommandError
from eval.match import GameResult, MatchConfig, MatchResult, run_match
from gojax import sgf
from train.agents import capture_agent, random_agent, search_agent, uct_agent
from train.arena import GAMES_AXIS, Agent, ArenaResult, play_arena, wilson_interval, write_sgf

__all__ = [
    "GAMES_AXIS",
    "Agent",
    "ArenaResult",
    "GTPAgent",
    "capture_agent",
    "elo_difference",
    "gnugo_agent",
    "play_arena",
    "play_games",
    "random_agent",
    "result_from_match",
    "search_agent",
    "uct_agent",
    "wilson_interval",
    "write_sgf",
]


# ----------------------------------------------------------------------------
# Move by move: a JAX agent as an in-process GTP engine for eval.match.


@functools.cache
def _jitted(fn):
    return jax.jit(fn)


class _AgentEngine:
    """Speaks the GTP that ``eval.match`` sends, for a JAX :class:`Agent`, without a process.

    Game ``g`` (counted by ``clear_board``) is played with the arena's keys:
    move ``t`` uses ``fold_in(fold_in(k_games, g), t)``, so against another
    :class:`Agent` it plays the games :func:`play_arena` plays.
    """

    def __init__(self, agent: Agent, key, *, rules: str, max_moves, threshold, first_game: int):
        self.agent = agent
        self.label = agent.name
        self.alive = True
        self.rules = rules
        self.max_moves = max_moves
        self.threshold = threshold
        self.key_games = jax.random.split(key)[1]
        self.game = first_game - 1
        self.size, self.komi = 19, 7.5
        self.state = None
        self._act = _jitted(agent.policy)

    def _new(self) -> None:
        cap = self.max_moves or 2 * self.size * self.size
        self.state = gojax.new_game(self.size, komi=self.komi, rules=self.rules, max_moves=cap)

    def request(self, command: str, *, timeout: float | None = None) -> tuple[bool, str]:
        del timeout
        name, *args = command.split()
        if name in ("name", "version", "protocol_version"):
            return True, {"name": self.agent.name, "version": "", "protocol_version": "2"}[name]
        if name == "list_commands":
            return True, "\n".join(_GTP_COMMANDS)
        if name == "quit":
            self.alive = False
            return True, ""
        if name == "boardsize":
            self.size = int(args[0])
            self._new()
            return True, ""
        if name == "clear_board":
            self.game += 1
            self._new()
            return True, ""
        if name == "komi":
            self.komi = float(args[0])
            self._new()  # the match sets komi before the first move
            return True, ""
        if name == "play":
            action = gojax.gtp_to_action(args[1], self.size)
            self.state = gojax.play(self.state, action)
            return True, ""
        if name == "genmove":
            return True, self._genmove()
        return False, "unknown command"

    def _genmove(self) -> str:
        t = int(self.state.move_number)
        key = jax.random.fold_in(jax.random.fold_in(self.key_games, self.game), t)
        batch = jax.tree.map(lambda x: x[None], self.state)
        actions, values = self._act(self.agent.params, batch, key[None])
        action = int(actions[0])
        if (
            self.threshold is not None
            and self.agent.has_value
            and float(values[0]) < -self.threshold
        ):
            return "resign"
        self.state = gojax.play(self.state, action)
        return gojax.action_to_gtp(action, self.size)

    def send(self, command: str, *, timeout: float | None = None) -> str:
        ok, text = self.request(command, timeout=timeout)
        if not ok:
            raise GTPCommandError(self.label, command, text)
        return text

    def known_commands(self) -> set[str]:
        return set(_GTP_COMMANDS)

    def knows(self, command: str) -> bool:
        return command in _GTP_COMMANDS

    def close(self, timeout: float = 5.0) -> int:
        del timeout
        self.alive = False
        return 0


_GTP_COMMANDS = (
    "protocol_version",
    "name",
    "version",
    "list_commands",
    "quit",
    "boardsize",
    "clear_board",
    "komi",
    "play",
    "genmove",
)


def _command_of(agent: Agent | GTPAgent) -> str | tuple[str, ...]:
    return agent.command if isinstance(agent, GTPAgent) else ("in-process", agent.name)


def result_from_match(match: MatchResult) -> ArenaResult:
    """An :class:`ArenaResult` (A's view) of the games of a GTP match, by game index."""
    games = sorted(match.games, key=lambda g: g.game)
    outcome = [0 if g.winner is None else (1 if g.winner == "A" else -1) for g in games]
    resigned = [0 if g.reason != "resign" else (1 if g.loser == g.black else -1) for g in games]
    return ArenaResult(
        outcome=np.asarray(outcome, np.int8),
        a_black=np.asarray([g.black == "A" for g in games], bool),
        score=np.asarray([_black_margin(g) for g in games], np.float32),
        length=np.asarray([g.moves for g in games], np.int32),
        finished=np.ones(len(games), bool),
        resigned=np.asarray(resigned, np.int8),
    )


def _black_margin(game: GameResult) -> float:
    """Black's margin of a GTP game: the referee's where it counted the game."""
    if game.counted_by != "referee":
        return game.margin
    winner = sgf.result_winner(game.result)  # parse_final_score's "B+12", "W+3.5" or "0"
    return 0.0 if winner == 0 else winner * float(game.result[2:])


def play_games(
    agent_a: Agent | GTPAgent,
    agent_b: Agent | GTPAgent,
    key: jax.Array,
    *,
    size: int,
    num_games: int,
    komi: float = 7.0,
    rules: str = "tromp-taylor",
    max_moves: int | None = None,
    opening_moves: int = 0,
    resign_threshold: float | None = None,
    batch_size: int | None = None,
    mesh: Mesh | None = None,
    sgf_dir: str | os.PathLike | None = None,
    move_timeout: float = 60.0,
    force_gtp: bool = False,
    referee: str | None = None,
) -> ArenaResult:
    """Games between any two agents: batched when both are :class:`Agent` s, else over GTP.

    The GTP path is ``eval.match.run_match`` (legality checks, forfeits,
    timeouts, SGF), with each JAX agent answering as an in-process engine on
    batches of one; ``sgf_dir`` then also receives ``results.jsonl`` and the
    engines' logs (a temporary folder when None). There the random openings are
    ``gojax match``'s (``opening_moves`` random moves off the first two lines, the
    same for the two games of a pair, drawn from ``key``). ``force_gtp`` sends two
    JAX agents through the GTP path too (they then play the same games as the
    batched path, slower, if they open no games). ``referee``, a
    GTP command, counts the GTP games that end by two passes with its
    ``final_score`` (dead stones removed as it judges them; see ``gojax match
    --referee``): for engines such as GnuGo that pass with dead stones on the
    board under chinese, aga or japanese rules. Batched games count on the board.
    """
    batched = isinstance(agent_a, Agent) and isinstance(agent_b, Agent) and not force_gtp
    if referee and batched:
        raise ValueError("a referee counts GTP games; two JAX agents play batched on the board")
    if batched:
        return play_arena(
            agent_a,
            agent_b,
            key,
            size=size,
            num_games=num_games,
            komi=komi,
            rules=rules,
            max_moves=max_moves,
            opening_moves=opening_moves,
            resign_threshold=resign_threshold,
            batch_size=batch_size,
            mesh=mesh,
            sgf_dir=sgf_dir,
        )
    for agent in (agent_a, agent_b):
        if not isinstance(agent, Agent | GTPAgent):
            raise ValueError(f"not an agent: {agent!r}")
    engines = {}
    for seat, agent in (("A", agent_a), ("B", agent_b)):
        if isinstance(agent, Agent):
            engines[seat] = functools.partial(
                _AgentEngine,
                agent,
                key,
                rules=rules,
                max_moves=max_moves,
                threshold=resign_threshold,
                first_game=0,
            )
    with tempfile.TemporaryDirectory(prefix="gojax-arena-") as scratch:
        out = Path(sgf_dir) if sgf_dir is not None else Path(scratch)
        config = MatchConfig(
            engine_a=_command_of(agent_a),
            engine_b=_command_of(agent_b),
            out=out,
            games=num_games,
            size=size,
            komi=komi,
            rules=rules,
            name_a=agent_a.name,
            name_b=agent_b.name,
            max_moves=max_moves,
            move_timeout=move_timeout,
            referee=referee or None,
            # The match's openings (random moves off the first two lines), seeded by the key.
            openings=int(opening_moves),
            opening_seed=int(jax.random.randint(key, (), 0, 2**31 - 1)) if opening_moves else 0,
        )
        match = run_match(config, engines=engines)
    return result_from_match(match)


def elo_difference(win_rate: float) -> float:
    """Elo difference implied by a win rate (``400 log10(p / (1 - p))``; ±inf at 0 and 1).

    >>> round(elo_difference(0.75), 1)
    190.8
    """
    if win_rate <= 0.0:
        return -math.inf
    if win_rate >= 1.0:
        return math.inf
    return 400.0 * math.log10(win_rate / (1.0 - win_rate))
