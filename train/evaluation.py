"""A batched arena: two agents play ``B`` games at once, colours alternating.

An *agent* is a function ``(states [B], key) -> actions [B] int32`` over
stacked ``gojax.GoState``s; it is traced inside one jitted ``lax.scan`` over
moves, so it must be jittable. Game ``i`` gives agent A Black when ``i`` is
even and White when odd, so komi and first-move advantage cancel over an even
number of games. A game ends by two passes or the move cap and is scored by
Tromp-Taylor area (``gojax.score``)::

    net = search_agent(spec, module, variables, SearchConfig(num_simulations=32))
    result = play_arena(net, random_agent(), key, size=9, num_games=64)
    result.summary()  # {"games": 64, "wins": ..., "win_rate": ..., "ci95": (lo, hi)}

Agents here: :func:`random_agent` (uniform over legal moves, pass included),
:func:`capture_agent` (one-move lookahead: the move that captures most),
:func:`search_agent` (a net with ``gojax.search``) and :func:`uct_agent`
(classical rollout MCTS, ``gojax.uct``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import gojax
from gojax.search import SearchConfig, search
from gojax.uct import uct_search
from train.model import ModelSpec, evaluator

__all__ = [
    "ArenaResult",
    "Agent",
    "capture_agent",
    "play_arena",
    "random_agent",
    "search_agent",
    "uct_agent",
    "wilson_interval",
]

Agent = Callable[[gojax.GoState, jax.Array], jax.Array]


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% for ``z = 1.96``); draws may count 0.5.

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    """
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclasses.dataclass(frozen=True)
class ArenaResult:
    """Outcomes of ``B`` games from agent A's point of view (host numpy arrays)."""

    outcome: np.ndarray  # [B] int8: +1 A won, -1 A lost, 0 draw
    a_black: np.ndarray  # [B] bool: A played Black
    score: np.ndarray  # [B] float32: Black's Tromp-Taylor margin, komi included
    length: np.ndarray  # [B] int32: moves played, passes included
    finished: np.ndarray  # [B] bool: ended by two passes or the move cap

    def summary(self) -> dict[str, Any]:
        """``games, wins, losses, draws, win_rate`` (draws half) and its Wilson ``ci95``."""
        n = int(self.outcome.size)
        wins = int((self.outcome > 0).sum())
        draws = int((self.outcome == 0).sum())
        points = wins + 0.5 * draws
        return {
            "games": n,
            "wins": wins,
            "losses": n - wins - draws,
            "draws": draws,
            "win_rate": points / n if n else float("nan"),
            "ci95": wilson_interval(points, n),
            "win_rate_as_black": _rate(self.outcome[self.a_black]),
            "win_rate_as_white": _rate(self.outcome[~self.a_black]),
            "mean_length": float(self.length.mean()) if n else float("nan"),
        }


def _rate(outcome: np.ndarray) -> float:
    return float(((outcome > 0) + 0.5 * (outcome == 0)).mean()) if outcome.size else float("nan")


# ----------------------------------------------------------------------------
# Agents.


def random_agent() -> Agent:
    """Uniformly random legal move (pass counts as one move)."""

    def act(states: gojax.GoState, key: jax.Array) -> jax.Array:
        legal = jax.vmap(gojax.legal_moves)(states)  # [B, A]
        logits = jnp.where(legal, 0.0, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    return act


def capture_agent() -> Agent:
    """One-move lookahead: the legal move that captures most stones; ties at random.

    Passes only when nothing else is legal. A weak but clearly better than
    random baseline (it is a test of the arena, not a player).
    """

    def captures(state: gojax.GoState) -> jax.Array:
        actions = jnp.arange(state.num_actions, dtype=jnp.int32)
        opponent = -state.to_play
        before = jnp.sum(state.board == opponent)
        after = jax.vmap(lambda a: jnp.sum(gojax.play(state, a).board == opponent))(actions)
        return (before - after).astype(jnp.float32)  # [A]

    def act(states: gojax.GoState, key: jax.Array) -> jax.Array:
        legal = jax.vmap(gojax.legal_moves)(states)  # [B, A]
        gain = jax.vmap(captures)(states)
        noise = jax.random.uniform(key, gain.shape, maxval=0.5)  # breaks ties only
        value = gain + noise
        value = value.at[:, -1].set(-1.0)  # pass last resort
        return jnp.argmax(jnp.where(legal, value, -jnp.inf), axis=-1).astype(jnp.int32)

    return act


def search_agent(spec: ModelSpec, module: Any, variables: Any, config: SearchConfig) -> Agent:
    """A net (``train.model.evaluator``) with ``gojax.search`` under ``config``.

    For evaluation use ``temperature_moves=0`` and ``dirichlet_fraction=0``
    (the most visited move, no root noise). ``variables`` are closed over:
    each new agent compiles its arena once.
    """

    def act(states: gojax.GoState, key: jax.Array) -> jax.Array:
        return search(evaluator(spec, module, variables), states, key, config).action

    return act


def uct_agent(num_simulations: int, *, c: float = 1.0) -> Agent:
    """Classical UCT with one random rollout per leaf (``gojax.uct.uct_search``)."""

    def act(states: gojax.GoState, key: jax.Array) -> jax.Array:
        return uct_search(states, key, num_simulations, c=c).action

    return act


# ----------------------------------------------------------------------------
# The arena.


@functools.partial(
    jax.jit, static_argnames=("agent_a", "agent_b", "size", "num_games", "komi", "rules", "moves")
)
def _arena(agent_a, agent_b, key, *, size, num_games, komi, rules, moves):
    states = jax.vmap(lambda _: gojax.new_game(size, komi=komi, rules=rules, max_moves=moves))(
        jnp.arange(num_games)
    )
    a_black = jnp.arange(num_games) % 2 == 0

    def step(states, t):
        def move(states):
            key_a, key_b = jax.random.split(jax.random.fold_in(key, t))
            a_to_move = (states.to_play == gojax.BLACK) == a_black
            action = jnp.where(a_to_move, agent_a(states, key_a), agent_b(states, key_b))
            # play() leaves a finished game unchanged.
            return jax.vmap(gojax.play)(states, action)

        # Once every game is over the remaining steps cost nothing.
        return jax.lax.cond(jnp.all(states.terminated), lambda s: s, move, states), None

    states, _ = jax.lax.scan(step, states, jnp.arange(moves))
    score = jax.vmap(gojax.score)(states)
    black_result = jnp.sign(score).astype(jnp.int8)
    outcome = jnp.where(a_black, black_result, -black_result)
    return outcome, a_black, score, states.move_number, states.terminated


def play_arena(
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    *,
    size: int,
    num_games: int,
    komi: float = 7.0,
    rules: str = "tromp-taylor",
    max_moves: int | None = None,
) -> ArenaResult:
    """Play ``num_games`` games of A against B in one jitted scan; A is Black in even games.

    Args:
      agent_a, agent_b: ``(states [B], key) -> actions [B]``; static (the same
        function objects reuse the compiled program).
      key: PRNG key, consumed.
      size, komi, rules: the game; ``max_moves`` caps its length (None:
        ``2 * size * size``), after which it is scored as it stands.
    """
    moves = int(max_moves) if max_moves is not None else 2 * size * size
    out = _arena(
        agent_a,
        agent_b,
        key,
        size=size,
        num_games=num_games,
        komi=float(komi),
        rules=rules,
        moves=moves,
    )
    outcome, a_black, score, length, finished = jax.device_get(out)
    return ArenaResult(
        outcome=np.asarray(outcome),
        a_black=np.asarray(a_black),
        score=np.asarray(score),
        length=np.asarray(length),
        finished=np.asarray(finished),
    )
