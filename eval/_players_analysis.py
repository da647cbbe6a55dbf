"""What every player of :mod:`eval.players` answers with, and the helpers they share.

:class:`Analysis` (with one :class:`MoveInfo` per candidate move) is a player's view of
one position; :class:`Player` is the interface the GTP engine talks to. Below them,
what more than one player needs: the analysis of one network evaluation
(:func:`_policy_analysis`), the ``avoid``/``allow`` rows (:func:`keep_out`,
:func:`root_moves`), a net's short-term errors (:func:`raw_errors`), whether its
ownership means anything, KataGo's description of it (:func:`model_info`). Apart from
the players so that the engine, the analysis engine and every family of players import
the types without importing each other.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from gojax import BLACK, GoState

# A callback that receives intermediate analyses while a search runs.
Progress = Callable[["Analysis"], None]


def model_info(model: Any, *, max_batch_size: int) -> dict[str, Any]:
    """KataGo's description of a loaded network (``kata-get-models``, the analysis
    engine's ``query_models``): file name, internal name, the most positions evaluated
    at once, the human-profile flag (none here), model version, half precision (no)."""
    name = getattr(model, "name", "model")
    return {
        "name": os.path.basename(getattr(model, "path", None) or name),
        "internalName": name,
        "maxBatchSize": int(max_batch_size),
        "usesHumanSLProfile": False,
        "version": model.version,
        "usingFP16": "false",
    }


@dataclasses.dataclass(frozen=True)
class MoveInfo:
    """One candidate move at the root, from the mover's view."""

    action: int  # row * size + col, size * size = pass
    visits: int  # simulations spent below this move
    winrate: float  # in [0, 1]
    score_lead: float  # points the mover leads by after this move
    prior: float  # network policy probability, in [0, 1]
    lcb: float  # lower confidence bound of the win rate, in [0, 1]
    order: int  # rank: 0 is the move genmove plays
    pv: tuple[int, ...]  # principal variation starting with ``action``
    pv_visits: tuple[int, ...] = ()  # visits of each edge along ``pv``
    # the chance of no result after this move, by the network (the position's own for
    # a one-evaluation analysis), as KataGo's analysis engine reports noResultValue
    no_result: float = 0.0
    # KataGo's utility for the mover: the mean win-loss value in [-1, 1] plus, where the
    # search weighs the score (``--search katago``), its mean score utility; and KataGo's
    # lower confidence bound on it (the bound ``lcb`` is shown from, on the win-rate scale)
    utility: float = 0.0
    utility_lcb: float = 0.0
    # the final score the evaluations below the move expect, their mean (KataGo's
    # scoreSelfplay, where ``score_lead`` is scoreLead) and its spread (scoreStdev)
    score_selfplay: float = 0.0
    score_stdev: float = 0.0
    # the move searched for this one, when this one is a board symmetry's image of it
    # at a symmetric position (KataGo's isSymmetryOf; SearchConfig.root_symmetry_pruning)
    symmetry_of: int | None = None


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What a player thinks of one position (the mover's view throughout)."""

    moves: tuple[MoveInfo, ...]  # candidates by ``order``; never empty
    visits: int  # root visits
    winrate: float  # root win rate, in [0, 1]
    score_lead: float  # root score lead in points
    score_stdev: float  # predicted spread of the final score in points (the search's)
    ownership: np.ndarray  # [P] float in [-1, 1], +1 = owned by the mover
    # [P] its standard deviation over the search's evaluations (KataGo's ownershipStdev;
    # 0 for one evaluation); None where the search did not keep its nodes' ownership
    ownership_stdev: np.ndarray | None = None
    # () -> ([K, P], [K, P]): each of ``moves``' mean ownership over the evaluations
    # below it and their standard deviation (KataGo's movesOwnership and
    # movesOwnershipStdev), worked out when asked for; None for one evaluation or a
    # search that kept no ownership
    moves_ownership: Callable[[], tuple[np.ndarray, np.ndarray]] | None = dataclasses.field(
        default=None, repr=False, compare=False
    )
    # the root's mean utility (see MoveInfo.utility) and mean final score (scoreSelfplay)
    utility: float = 0.0
    score_selfplay: float = 0.0
    # the root evaluation's short-term error heads and time-left variance (KataGo's
    # rawStWrError, rawStScoreError, rawVarTimeLeft); None for nets without them
    raw_errors: tuple[float, float, float] | None = None
    # [P+1] the one evaluation's probability of every move, pass last, 0 on the moves it
    # could not choose (``moves`` lists only the likeliest); None from a search
    policy: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def best(self) -> MoveInfo:
        """The move ``genmove`` plays."""
        return self.moves[0]


class Player(Protocol):
    """The interface the engine talks to."""

    name: str
    # Whether ``Analysis.ownership`` means anything (a network that learned it): the
    # engine's dead stones come from it (``Engine.dead_stones``).
    has_ownership: bool

    def analyze(
        self,
        state: GoState,
        *,
        visits: int,
        key: jax.Array,
        deadline: float | None = None,
        progress: Progress | None = None,
        avoid: np.ndarray | None = None,
        stop: threading.Event | None = None,
    ) -> Analysis:
        """Think about ``state`` (not finished) for at most ``visits`` visits.

        ``deadline`` is a ``time.monotonic()`` instant the answer must come
        before; ``progress`` may be called with intermediate analyses;
        ``avoid`` ``[2, A]`` keeps moves out as ``gojax.search.search``'s
        (GTP's ``avoid``/``allow``; None: nothing kept out); once ``stop`` is
        set, the answer comes as soon as it can, from the thinking done so far.
        """
        ...

    def ponder(
        self,
        state: GoState,
        *,
        key: jax.Array,
        avoid: np.ndarray | None = None,
        game: GoState | None = None,
    ) -> Iterator[Analysis]:
        """Endless analyses of ``state``, each at least as deep as the last (for lz-analyze).

        ``game``: the game's position with its moves where ``state`` shows it without
        them (KataGo's ``analysisIgnorePreRootHistory``); a player that keeps a tree
        follows the moves played since its last such analysis through it.
        """
        ...

    def evaluate(self, state: GoState) -> Analysis:
        """The network's opinion of ``state`` alone (ownership for dead stones, handicap)."""
        ...

    def warmup(self, state: GoState) -> None:
        """Compile what ``analyze`` needs for this board size and rule set."""
        ...

    def new_game(self) -> None:
        """Forget any search tree kept between moves."""
        ...


@functools.cache
def _jitted(fn):
    return jax.jit(fn)


def _batch(state: GoState) -> GoState:
    return jax.tree.map(lambda x: x[None], state)


def keep_out(plies: np.ndarray, colour: int, actions: list[int], depth: int, *, allow: bool):
    """Write one ``avoid`` (or ``allow``) entry of ``colour`` into ``plies [2, A]``, the
    ``avoid`` of ``gojax.search.search``: those moves (or all others) kept out for ``depth``
    plies; a later entry overwrites an earlier one, as in KataGo."""
    row = plies[0 if colour == BLACK else 1]
    if allow:
        row[:] = depth
        row[actions] = 0
    else:
        row[actions] = depth


def root_moves(avoid: np.ndarray | None, mover: int) -> np.ndarray | None:
    """``[A]`` bool: the moves ``avoid [2, A]`` leaves to ``mover`` at the root (a move kept
    out until ply 1 or later is not), or None when it keeps nothing out."""
    if avoid is None:
        return None
    row = np.asarray(avoid)[0 if mover == BLACK else 1]
    return None if not row.any() else row == 0


def _live(state: GoState) -> GoState:
    """``state`` with the game going on, so that a finished game can still be analysed."""
    return state.replace(terminated=jnp.asarray(False), passes=jnp.asarray(0, jnp.int8))


def _policy_analysis(
    policy: np.ndarray,
    legal: np.ndarray,
    winrate: float,
    score_lead: float,
    score_stdev: float,
    ownership: np.ndarray,
    *,
    chosen: int | None = None,
    max_moves: int = 20,
    min_prior: float = 1e-3,
    allowed: np.ndarray | None = None,
    no_result: float = 0.0,
    score_selfplay: float | None = None,
    raw_errors: tuple[float, float, float] | None = None,
) -> Analysis:
    """The analysis of one network evaluation: moves by prior, ``chosen`` first with 1 visit.

    Every move gets the position's own numbers (no move was looked into), its utility
    the value alone.

    Args:
      policy: ``[P+1]`` probabilities, pass last (0 on illegal moves).
      legal: ``[P+1]`` bool.
      chosen: the move to put first (default: the most probable listed move).
      allowed: ``[P+1]`` bool, the only moves to list (as :func:`root_moves`); ignored
        where it leaves no legal move.
      score_selfplay: the mean of the predicted final score (default: ``score_lead``).
      raw_errors: the evaluation's :func:`raw_errors`.
    """
    score_selfplay = score_lead if score_selfplay is None else score_selfplay
    utility = 2.0 * winrate - 1.0
    if allowed is not None and np.any(legal & allowed):
        legal = legal & allowed
    scores = np.where(legal, policy, -1.0)
    ranked = [int(a) for a in np.argsort(-scores, kind="stable") if legal[a]]
    if chosen is None:
        chosen = ranked[0]
    ranked = [chosen] + [a for a in ranked if a != chosen]
    keep = [a for a in ranked[:max_moves] if a == chosen or policy[a] >= min_prior]
    moves = tuple(
        MoveInfo(
            action=a,
            visits=1 if a == chosen else 0,
            winrate=winrate,
            score_lead=score_lead,
            prior=float(policy[a]),
            # With no visits there is no confidence in the move at all.
            lcb=winrate if a == chosen else 0.0,
            order=i,
            pv=(a,),
            pv_visits=(1 if a == chosen else 0,),
            no_result=no_result,
            utility=utility,
            utility_lcb=utility if a == chosen else -1.0,
            score_selfplay=score_selfplay,
            score_stdev=score_stdev,
        )
        for i, a in enumerate(keep)
    )
    return Analysis(
        moves=moves,
        visits=1,
        winrate=winrate,
        score_lead=score_lead,
        score_stdev=score_stdev,
        ownership=ownership,
        ownership_stdev=np.zeros_like(ownership),
        utility=utility,
        score_selfplay=score_selfplay,
        raw_errors=raw_errors,
        policy=np.where(legal, policy, 0.0).astype(np.float32),
    )


def raw_errors(out: dict[str, np.ndarray], row: int = 0) -> tuple[float, float, float] | None:
    """KataGo's ``rawStWrError``, ``rawStScoreError`` and ``rawVarTimeLeft`` of row ``row``
    of a net's outputs (its win-loss error on the [0, 1] win-rate scale, hence the half),
    or None where the net has no short-term heads."""
    if "shortterm_winloss_error" not in out:
        return None
    take = lambda key: _finite(float(np.asarray(out[key]).reshape(-1)[row]))  # noqa: E731
    return (
        0.5 * take("shortterm_winloss_error"),
        take("shortterm_score_error"),
        take("var_time_left"),
    )


def knows_ownership(model: Any) -> bool:
    """Whether ``model``'s ownership output means anything.

    KataGo files always; a ``TrainedModel`` when its run learned ownership
    (``TrainedModel.has_ownership``); a network-free search's stand-in never.
    """
    return bool(getattr(model, "has_ownership", True))


def _now() -> float:
    return time.monotonic()


def _finite(x: float, default: float = 0.0) -> float:
    return x if math.isfinite(x) else default
