"""The players of :mod:`eval.players` that answer with one evaluation, no search:
:class:`PolicyPlayer` (the raw network policy) and :class:`UniformPlayer` (uniform
priors and a random legal move, no network). Their whole analysis is one call, so
pondering repeats it and nothing can be stopped (:class:`_OneShotPlayer`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from eval._players_analysis import (
    Analysis,
    _batch,
    _live,
    _policy_analysis,
    knows_ownership,
    raw_errors,
    root_moves,
)
from gojax import GoState, legal_moves, play


class _OneShotPlayer:
    """A player whose whole analysis is one call of ``self._analysis(state, key)``."""

    def analyze(
        self, state, *, visits, key, deadline=None, progress=None, avoid=None, stop=None
    ) -> Analysis:
        # One evaluation: nothing to stop.
        analysis = self._analysis(state, key, root_moves(avoid, int(state.to_play)))
        if progress is not None:
            progress(analysis)
        return analysis

    def ponder(
        self, state: GoState, *, key: jax.Array, avoid=None, game=None
    ) -> Iterator[Analysis]:
        del game  # one evaluation of what is shown: nothing kept to follow
        analysis = self._analysis(state, key, root_moves(avoid, int(state.to_play)))
        while True:  # one evaluation says all this player will ever say
            yield analysis


class PolicyPlayer(_OneShotPlayer):
    """The raw policy of a KataGo network: one evaluation, the most probable legal move.

    The analysis lists legal moves by prior; the chosen one has 1 visit, the
    others 0; every win rate and score is the root's (the value head's).
    """

    def __init__(
        self,
        model: Any,
        *,
        symmetry: int | str = "average",
        policy_optimism: float = 0.0,
        moves: str = "legal",
    ) -> None:
        from gojax.evaluate import make_evaluator
        from gojax.search import MOVE_SETS

        if moves not in MOVE_SETS:
            raise ValueError(f"moves must be one of {sorted(MOVE_SETS)}, not {moves!r}")
        self.model = model
        self._move_set = None if moves == "legal" else MOVE_SETS[moves]
        self.has_ownership = knows_ownership(model)
        # A net whose heads fix the board size says so (``TrainedModel`` of an AGZ net).
        self.board_sizes = getattr(model, "board_sizes", None)
        optimism = f", policy optimism {policy_optimism:g}" if policy_optimism else ""
        self.name = f"policy({model.name}{optimism})"
        self.symmetry = symmetry
        self._run = make_evaluator(model, symmetry=symmetry, policy_optimism=policy_optimism)

    def _outputs(self, state: GoState, key: jax.Array | None = None) -> dict[str, np.ndarray]:
        if key is None:
            key = jax.random.key(0)
        out = self._run(self.model.variables, _batch(state), key=key)
        return {k: np.asarray(v[0]) for k, v in out.items()}

    def _analysis(
        self, state: GoState, key: jax.Array | None = None, allowed: np.ndarray | None = None
    ) -> Analysis:
        out = self._outputs(state, key)
        mover = int(state.to_play)
        white_win = float(out["white_win"] + 0.5 * out["no_result"])
        winrate = white_win if mover == -1 else 1.0 - white_win
        lead = float(out["white_lead"]) * -mover
        ownership = out["white_ownership"] * -mover
        legal = out["legal"]
        if self._move_set is not None:  # the move set the net was trained to choose from
            legal = legal & np.asarray(self._move_set(state))
        return _policy_analysis(
            out["policy"],
            legal,
            winrate,
            lead,
            float(out["score_stdev"]),
            ownership.astype(np.float32),
            allowed=allowed,
            no_result=float(out["no_result"]),
            score_selfplay=float(out["white_score_selfplay"]) * -mover,
            raw_errors=raw_errors(out),
        )

    def evaluate(self, state: GoState) -> Analysis:
        return self._analysis(state)

    def warmup(self, state: GoState) -> None:
        self._analysis(state)

    def new_game(self) -> None:
        pass


class UniformPlayer(_OneShotPlayer):
    """Uniform priors over legal moves, a random legal move; no network.

    Pass is played only when nothing else is legal. Win rate 0.5, score 0,
    ownership 0: a fast, honest stand-in for protocol tests.
    """

    name = "uniform"
    has_ownership = False

    def __init__(self, *, max_moves: int = 10) -> None:
        self.max_moves = max_moves

    def _analysis(
        self, state: GoState, key: jax.Array, allowed: np.ndarray | None = None
    ) -> Analysis:
        legal = np.array(legal_moves(_live(state)))
        legal[-1] = True
        choices = legal & allowed if allowed is not None and np.any(legal & allowed) else legal
        points = np.flatnonzero(choices[:-1])
        policy = legal / legal.sum()
        if len(points):
            chosen = int(points[int(jax.random.randint(key, (), 0, len(points)))])
        else:
            chosen = len(legal) - 1
        return _policy_analysis(
            policy,
            legal,
            0.5,
            0.0,
            0.0,
            np.zeros(len(legal) - 1, np.float32),
            chosen=chosen,
            max_moves=self.max_moves,
            min_prior=0.0,
            allowed=allowed,
        )

    def evaluate(self, state: GoState) -> Analysis:
        return self._analysis(state, jax.random.key(0))

    def warmup(self, state: GoState) -> None:
        legal_moves(state)
        play(state, jnp.int32(0))

    def new_game(self) -> None:
        pass
