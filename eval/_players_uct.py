"""The classical player of :mod:`eval.players`: :class:`UCTPlayer`, UCT with random
rollouts and no network (the pre-AlphaGo baseline, ``gojax.uct``), on the machinery of
:class:`eval._players_search.SearchPlayer` with rollout evaluations in place of a net.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from eval._players_analysis import Analysis, _jitted, _policy_analysis
from eval._players_search import SearchPlayer
from gojax import GoState, legal_moves


@dataclasses.dataclass(frozen=True)
class _NoNetwork:
    """What a network-free search player holds where others hold a model."""

    name: str
    variables: Any = None
    has_ownership: bool = False


class UCTPlayer(SearchPlayer):
    """Classical Monte-Carlo tree search over GTP: UCT with random rollouts, no network.

    The pre-AlphaGo baseline (``gojax.uct``): each of ``visits`` simulations
    expands one node by UCB1 and plays one random game from it (uniform over
    the moves that fill none of the mover's own eyes, or drawn from a fast
    rollout policy, ``rollout_weights``), scored by the rules' area count.
    The tree is kept between moves as the network players keep theirs. With
    no network there is no score or ownership estimate (score leads are 0,
    ownership 0) and no prior (every listed move's prior is uniform); short
    of time, the move is a random rollout move.
    """

    def __init__(
        self,
        *,
        visits: int = 256,
        c: float = 1.0,
        moves: str = "sensible",
        max_listed: int = 16,
        time_factor: float = 1.5,
        ponder_visits: int | None = None,
        rollout_weights: Any = None,
        root_symmetry_pruning: bool = True,
    ) -> None:
        from gojax.search import SearchConfig

        config = SearchConfig(
            kind="uct",
            num_simulations=int(visits),
            uct_c=c,
            dirichlet_fraction=0.0,
            temperature_moves=0,
            moves=moves,
            root_symmetry_pruning=bool(root_symmetry_pruning),
        )
        self._extras = " of the fast policy" if rollout_weights is not None else ""
        self._auto_considered = False
        self._setup(
            # The rollout policy's weights (or None) travel where a net's variables would.
            _NoNetwork(name=f"uct{visits}", variables=rollout_weights),
            board_sizes=None,
            symmetry=0,
            config=config,
            functions=_uct_functions(),
            max_listed=max_listed,
            time_factor=time_factor,
            ponder_visits=ponder_visits,
        )

    @property
    def name(self) -> str:
        lcb = ", LCB move" if self.config.lcb_selection else ""
        return f"uct({self.visits} playouts{self._extras}{lcb})"

    def _policy(self, state: GoState, key: jax.Array, allowed=None) -> Analysis:
        from gojax.uct import rollout_moves

        choices = np.asarray(_jitted(rollout_moves)(state))
        legal = np.asarray(legal_moves(state))
        if allowed is not None and np.any(legal & allowed):
            legal = legal & allowed
            choices = choices & allowed
        if not choices.any():  # a finished game, or nothing a rollout would play: pass
            choices = np.zeros_like(choices)
            choices[-1] = True
        chosen = int(jax.random.choice(key, np.flatnonzero(choices)))
        policy = legal / max(legal.sum(), 1)
        zeros = np.zeros(state.board.shape, np.float32)
        return _policy_analysis(policy, legal, 0.5, 0.0, 0.0, zeros, chosen=chosen)


@functools.cache
def _uct_functions():
    """``_search_functions``' functions for :class:`UCTPlayer` (``variables``: the
    rollout policy's weights, or None for uniform rollouts); no network cache (the
    rollouts are random)."""
    from gojax.search import reuse_subtree, search
    from gojax.uct import rollout_evaluator

    @functools.partial(jax.jit, static_argnames=("config", "resume"))
    def run_search(
        variables, states, key, config, tree, avoid, stop_at=None, resume=False, cache=None
    ):
        evaluator = rollout_evaluator(1, weights=variables)
        return search(evaluator, states, key, config, tree, avoid, stop_at=stop_at, resume=resume)

    @jax.jit
    def run_evaluate(variables, state, actions, key):
        del variables, key
        rows = actions.shape[0] + 1
        legal = legal_moves(state)
        zeros = jnp.zeros((rows,), jnp.float32)
        return {
            "policy": jnp.tile(legal / jnp.maximum(legal.sum(), 1), (rows, 1)),
            "legal": jnp.tile(legal, (rows, 1)),
            "white_win": zeros + 0.5,
            "no_result": zeros,
            "white_lead": zeros,
            "white_score_selfplay": zeros,
            "score_stdev": zeros,
            "white_ownership": jnp.zeros((rows,) + state.board.shape, jnp.float32),
        }

    return run_search, run_evaluate, jax.jit(reuse_subtree), None
