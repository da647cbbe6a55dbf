"""Classical Monte-Carlo tree search: UCT with random rollouts, and AlphaGo's mixed value.

Before AlphaGo, Go programs searched with UCT (UCB1 applied to trees, Kocsis
and Szepesvári 2006) and valued a leaf by playing the game out at random
(Gelly et al.'s MoGo, 2006). AlphaGo (Silver et al. 2016) kept the rollouts
and mixed them with a value network: ``V = (1 - lambda) * v + lambda * z``.

Everything here is batched JAX: a rollout is a ``lax.while_loop`` over the
moves of ``B * R`` games at once, a move a ``jax.random.categorical`` draw
over the allowed moves, and the search is ``gojax.search.search`` with
``kind="uct"`` and a rollout evaluator, so it shares its tree, terminal
handling, masking and tree reuse.

The rollout policy: uniform over the legal moves, except (by default) moves
that fill one of the mover's own single-point eyes -- the one piece of
knowledge every Monte-Carlo Go program had, since without it random play
fills its own eyes and every group dies. Pass is played only when nothing
else is allowed. Given ``weights`` (``gojax.rollout_policy``, AlphaGo's
fast rollout policy fitted to game records), a move is drawn from that
policy's softmax over the same moves instead. A rollout ends with two passes
or the game's move cap (``GoState.max_moves``), and is scored by the rules'
area count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gojax._board import GoState, legal_moves, play
from gojax._counting import winner
from gojax._moves import own_eyes
from gojax.rollout_policy import RolloutWeights
from gojax.rollout_policy import logits as policy_logits
from gojax.search import Evaluator, SearchConfig, SearchOutput, search, uniform_evaluator

__all__ = [
    "mixed_evaluator",
    "random_rollout",
    "rollout_evaluator",
    "rollout_moves",
    "uct_search",
]


def rollout_moves(state: GoState, *, avoid_eyes: bool = True) -> jax.Array:
    """``[P + 1]`` bool: the moves the rollout policy draws from in one position.

    Legal moves, minus (with ``avoid_eyes``) empty points whose every
    neighbour is the mover's stone or the edge; pass only when nothing else
    remains. Empty for a finished game.
    """
    legal = legal_moves(state)
    points = legal[:-1]
    if avoid_eyes:
        points = points & ~own_eyes(state)
    return jnp.append(points, legal[-1] & ~jnp.any(points))


def random_rollout(
    states: GoState,
    key: jax.Array,
    num_rollouts: int = 1,
    *,
    avoid_eyes: bool = True,
    weights: RolloutWeights | None = None,
) -> jax.Array:
    """``[B]`` mean result of ``num_rollouts`` random games from each state, in [-1, 1].

    The result is +1 for a win of the player to move in ``states``, -1 for a
    loss, 0 for a draw (Tromp-Taylor area with komi at the end). A finished
    game is just scored. Moves are uniform over :func:`rollout_moves`, or
    drawn from the rollout policy ``weights`` over the same moves.
    """
    batch = states.to_play.shape[0]
    games = jax.tree.map(lambda x: jnp.repeat(x, num_rollouts, axis=0), states)  # [B * R]

    def cond(carry):
        games, _ = carry
        return ~jnp.all(games.terminated)

    def body(carry):
        games, key = carry
        key, draw = jax.random.split(key)
        allowed = jax.vmap(lambda s: rollout_moves(s, avoid_eyes=avoid_eyes))(games)
        if weights is None:
            preference = jnp.zeros(allowed.shape, jnp.float32)
        else:  # pass is allowed only when no point is, so its logit never competes
            points = jax.vmap(policy_logits, in_axes=(None, 0))(weights, games)
            preference = jnp.pad(points, ((0, 0), (0, 1)))
        actions = jax.random.categorical(draw, jnp.where(allowed, preference, -jnp.inf))
        # A finished game has no allowed move and ``play`` leaves it unchanged.
        return jax.vmap(play)(games, actions), key

    final, _ = jax.lax.while_loop(cond, body, (games, key))
    result = jax.vmap(winner)(final).astype(jnp.float32)
    mover = jnp.repeat(states.to_play, num_rollouts).astype(jnp.float32)
    return jnp.mean((result * mover).reshape(batch, num_rollouts), axis=1)


def mixed_evaluator(
    evaluator: Evaluator,
    lam: float,
    rollouts: int = 1,
    *,
    avoid_eyes: bool = True,
    weights: RolloutWeights | None = None,
) -> Evaluator:
    """AlphaGo's leaf value ``(1 - lam) * v + lam * z``: a value net mixed with rollouts.

    ``v`` is ``evaluator``'s value, ``z`` the mean of ``rollouts`` random
    games (:func:`random_rollout`, with the rollout policy ``weights`` if
    given); the prior (and score, if any) is ``evaluator``'s. AlphaGo used ``lam = 0.5``;
    ``lam = 0`` skips the rollouts, ``lam = 1`` is pure Monte-Carlo.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], not {lam}")
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, not {rollouts}")

    def evaluate(states: GoState, key: jax.Array) -> tuple[jax.Array, ...]:
        key_net, key_rollout = jax.random.split(key)
        logits, value, *score = evaluator(states, key_net)
        if lam == 0.0:
            return (logits, value, *score)
        z = random_rollout(states, key_rollout, rollouts, avoid_eyes=avoid_eyes, weights=weights)
        return (logits, (1.0 - lam) * value + lam * z, *score)

    return evaluate


def rollout_evaluator(
    rollouts: int = 1, *, avoid_eyes: bool = True, weights: RolloutWeights | None = None
) -> Evaluator:
    """Uniform prior over legal moves, value = mean of ``rollouts`` random games
    (played by the rollout policy ``weights`` if given)."""
    return mixed_evaluator(
        uniform_evaluator(), 1.0, rollouts, avoid_eyes=avoid_eyes, weights=weights
    )


def uct_search(
    states: GoState,
    key: jax.Array,
    num_simulations: int,
    *,
    rollouts_per_leaf: int = 1,
    c: float = 1.0,
    evaluator: Evaluator | None = None,
    lam: float = 1.0,
    avoid_eyes: bool = True,
    moves: str = "legal",
    tree=None,
    weights: RolloutWeights | None = None,
) -> SearchOutput:
    """UCT (UCB1 selection) over ``[B]`` positions, leaves valued by random rollouts.

    Each simulation expands one node and plays ``rollouts_per_leaf`` random
    games from it; the move is the most visited. With ``evaluator`` (a value
    net) the leaf value is AlphaGo's mix ``(1 - lam) * v + lam * z``.
    ``c`` is UCB1's constant on Q in [-1, 1]. ``moves`` is the tree's move
    set (``SearchConfig.moves``; rollouts always avoid their own eyes when
    ``avoid_eyes``). ``tree`` continues a reused
    tree as in ``search``. ``weights`` (``gojax.rollout_policy``) play the
    rollouts with AlphaGo's fast rollout policy instead of uniformly. Jittable
    with everything but ``states``, ``key``, ``tree`` and ``weights`` static.
    """
    base = uniform_evaluator() if evaluator is None else evaluator
    leaf = mixed_evaluator(
        base,
        1.0 if evaluator is None else lam,
        rollouts_per_leaf,
        avoid_eyes=avoid_eyes,
        weights=weights,
    )
    config = SearchConfig(
        kind="uct",
        num_simulations=num_simulations,
        uct_c=c,
        dirichlet_fraction=0.0,
        temperature_moves=0,
        moves=moves,
    )
    return search(leaf, states, key, config, tree)
