"""JAX agents for the arena (``train.arena``): random, capture, network search and UCT.

Each constructor returns an :class:`~train.arena.Agent`: a jittable ``policy(params,
states [B], keys [B]) -> (actions [B] int32, values [B] float32)`` and its ``params``.
Policies are cached by their settings, so agents of one kind share the compiled arena.
Players behind GTP (GnuGo, KataGo) are ``eval.agents``'.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

import gojax
from gojax.rollout_policy import RolloutWeights
from gojax.search import SearchConfig, search
from gojax.uct import mixed_evaluator, uct_search
from train.arena import Agent, Policy
from train.model import ModelSpec, build, evaluator

__all__ = ["capture_agent", "random_agent", "search_agent", "uct_agent"]


def _no_value(states: gojax.GoState) -> jax.Array:
    return jnp.zeros(states.to_play.shape, jnp.float32)


def _random_policy(params, states, keys):
    del params
    legal = jax.vmap(gojax.legal_moves)(states)  # [B, A]
    logits = jnp.where(legal, 0.0, -jnp.inf)
    actions = jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)
    return actions, _no_value(states)


def random_agent() -> Agent:
    """Uniformly random legal move (pass counts as one move)."""
    return Agent("random", _random_policy)


def _capture_gain(state: gojax.GoState) -> jax.Array:
    """``[A]`` float32: opponent stones each move captures (anything for illegal moves)."""
    actions = jnp.arange(state.num_actions, dtype=jnp.int32)
    opponent = -state.to_play
    before = jnp.sum(state.board == opponent)
    after = jax.vmap(lambda a: jnp.sum(gojax.play(state, a).board == opponent))(actions)
    return (before - after).astype(jnp.float32)


def _capture_policy(params, states, keys):
    del params
    legal = jax.vmap(gojax.legal_moves)(states)  # [B, A]
    gain = jax.vmap(_capture_gain)(states)
    noise = jax.vmap(lambda k: jax.random.uniform(k, gain.shape[1:], maxval=0.5))(keys)
    value = (gain + noise).at[:, -1].set(-1.0)  # noise breaks ties only; pass last resort
    actions = jnp.argmax(jnp.where(legal, value, -jnp.inf), axis=-1).astype(jnp.int32)
    return actions, _no_value(states)


def capture_agent() -> Agent:
    """One-move lookahead: the legal move that captures most stones; ties at random.

    Passes only when nothing else is legal. A weak but clearly better than
    random baseline (a test of the arena, not a player).
    """
    return Agent("capture", _capture_policy)


@functools.cache
def _search_policy(
    spec: ModelSpec,
    config: SearchConfig,
    rollout_lambda: float = 0.0,
    rollouts: int = 1,
    fast_rollouts: bool = False,
) -> Policy:
    module = build(spec)

    def policy(params, states, keys):
        weights = None
        if fast_rollouts:  # params: (network variables, rollout policy weights)
            params, weights = params
        net = evaluator(spec, module, params)
        if rollout_lambda:
            net = mixed_evaluator(net, rollout_lambda, rollouts, avoid_eyes=True, weights=weights)

        def one(state, key):
            batch = jax.tree.map(lambda x: x[None], state)
            out = search(net, batch, key, config)
            return out.action[0], out.root_value[0]

        return jax.vmap(one)(states, keys)

    return policy


def search_agent(
    spec: ModelSpec,
    variables: Any,
    config: SearchConfig,
    *,
    name: str | None = None,
    rollout_lambda: float = 0.0,
    rollouts: int = 1,
    rollout_weights: RolloutWeights | None = None,
) -> Agent:
    """A ``train.model`` net (``ModelSpec`` ``spec``) with ``gojax.search`` under ``config``.

    For evaluation use ``temperature_moves=0`` and ``dirichlet_fraction=0``
    (the most visited move, no root noise). The value is the search's root
    value. With ``rollout_lambda > 0`` every leaf is valued as AlphaGo's
    search did: ``(1 - lambda) v + lambda r``, ``r`` the mean of ``rollouts``
    random games from it (``gojax.uct.mixed_evaluator``), played by the
    rollout policy ``rollout_weights`` (``gojax.rollout_policy``) if given.
    Agents with equal ``spec``, ``config`` and rollout settings share one
    compiled arena.
    """
    if not 0.0 <= rollout_lambda <= 1.0:
        raise ValueError(f"rollout_lambda must be in [0, 1], not {rollout_lambda}")
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, not {rollouts}")
    if name is None:
        name = f"{spec.preset}-{config.kind}{config.num_simulations}"
        name += f"-lam{rollout_lambda:g}" if rollout_lambda else ""
    if rollout_weights is not None and not rollout_lambda:
        raise ValueError("a rollout policy needs rollout_lambda > 0 (the rollouts are unused)")
    fast = rollout_weights is not None
    rollouts = int(rollouts) if rollout_lambda else 1  # unused at lambda 0: one compiled search
    policy = _search_policy(spec, config, float(rollout_lambda), rollouts, fast)
    params = (variables, rollout_weights) if fast else variables
    return Agent(name, policy, params, has_value=True)


@functools.cache
def _uct_policy(num_simulations: int, c: float, moves: str) -> Policy:
    def policy(params, states, keys):
        # params: the rollout policy's weights, or None for uniform rollouts.
        def one(state, key):
            batch = jax.tree.map(lambda x: x[None], state)
            out = uct_search(batch, key, num_simulations, c=c, moves=moves, weights=params)
            return out.action[0], out.root_value[0]

        return jax.vmap(one)(states, keys)

    return policy


def uct_agent(
    num_simulations: int,
    *,
    c: float = 1.0,
    moves: str = "legal",
    rollout_weights: RolloutWeights | None = None,
    rollout_label: str = "fast",
) -> Agent:
    """Classical UCT with one random rollout per leaf (``gojax.uct.uct_search``).

    ``moves`` is the tree's move set (``SearchConfig.moves``): give it the
    same set as the net it is compared with, so that both know as much Go.
    With ``rollout_weights`` (``gojax.rollout_policy``) the rollouts are played
    by AlphaGo's fast rollout policy; the agent is named
    ``uct<simulations>+<rollout_label>``.
    """
    policy = _uct_policy(int(num_simulations), float(c), moves)
    name = f"uct{num_simulations}"
    if rollout_weights is not None:
        name += f"+{rollout_label}"
    return Agent(name, policy, rollout_weights, True)
