"""Move choosers for the GTP engine: one interface, several ways to pick a move.

A player looks at one position and returns an :class:`Analysis`: the
candidate moves with their visits, win rates, score leads, priors, lower
confidence bounds and principal variations, plus the root's win rate, score
and ownership. ``genmove`` plays the candidate of ``order`` 0; the analysis
commands (``lz-analyze``, ``kata-analyze``) print the list.

Every number is from the view of the player to move at the root (KataGo's
``SIDETOMOVE`` convention, what Lizzie and Sabaki expect).

* :class:`PolicyPlayer`: the raw network policy, one evaluation, no search.
* :class:`SearchPlayer`: tree search (``gojax.search``) with a visit budget,
  an optional deadline, and tree reuse between moves when search offers it.
* :class:`UniformPlayer`: uniform priors and a random legal move, no network;
  for protocol tests and as a sparring partner.
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

from eval.katago_names import ANALYSIS_WIDE_ROOT_NOISE
from gojax import BLACK, GoState, legal_moves, play
from gojax.evaluate import KATAGO_POLICY_OPTIMISM, KATAGO_ROOT_POLICY_OPTIMISM

# A callback that receives intermediate analyses while a search runs.
Progress = Callable[["Analysis"], None]
# The searches a SearchPlayer runs (``gojax.search`` kinds with a network).
SEARCH_KINDS = ("puct", "gumbel", "katago")
# Pondering (``lz-analyze``/``kata-analyze``) grows one search to PONDER_FACTOR moves'
# visits (at least PONDER_LEAST), reporting after each of PONDER_PARTS parts.
PONDER_FACTOR = 16
PONDER_LEAST = 256
PONDER_PARTS = 16
# A search that may be stopped (``analyze``'s ``stop``: KataGo's ``_cancellable``
# commands) runs in this many parts, and looks for the stop between them.
STOPPABLE_PARTS = 16


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


def has_optimistic_policy(model: Any) -> bool:
    """Whether ``model`` (a ``KataGoModel``, or any player's model) has KataGo's
    optimistic policy head."""
    return bool(getattr(getattr(model, "config", None), "optimistic_policy", False))


def policy_optimism(
    model: Any, root: float | None = None, below: float | None = None
) -> tuple[float, float]:
    """``(root, below)`` policy optimism for searching with ``model``: KataGo's defaults
    (0.2, 1.0) for a net with an optimistic policy and (0, 0) for others where a value is
    None. A value outside [0, 1], or a non-zero one for a net without the head, is a
    ``ValueError``."""
    optimistic = has_optimistic_policy(model)
    defaults = (KATAGO_ROOT_POLICY_OPTIMISM, KATAGO_POLICY_OPTIMISM) if optimistic else (0, 0)
    root = float(defaults[0] if root is None else root)
    below = float(defaults[1] if below is None else below)
    for name, value in (("root policy optimism", root), ("policy optimism", below)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], not {value:g}")
        if value and not optimistic:
            raise ValueError(
                f"{name} needs a net with KataGo's optimistic policy (model version >= 12); "
                f"{getattr(model, 'name', 'this net')} has none"
            )
    return root, below


def optimism_modules(model: Any, optimism: tuple[float, float]) -> tuple[Any, Any]:
    """``(net, root_net)`` for searching with ``(root, below)`` policy optimism: the module
    of every node below the root, and the root's, or None when the root's is the same."""
    root, below = optimism
    net = model.module(policy_optimism=below)
    return net, (None if root == below else model.module(policy_optimism=root))


def optimism_label(optimism: tuple[float, float]) -> str:
    """``", policy optimism ROOT/BELOW"`` for names, or ``""`` when both are 0."""
    return f", policy optimism {optimism[0]:g}/{optimism[1]:g}" if any(optimism) else ""


def score_utility_settings(search: str, score_utility: bool) -> dict[str, float]:
    """``SearchConfig`` fields for a search that weighs the score (KataGo's weights, the
    defaults) or not; only ``search="katago"`` weighs it, so only it can turn it off."""
    if score_utility:
        return {}
    if search != "katago":
        raise ValueError("only the katago search weighs scores: nothing to turn off")
    return {"static_score_utility": 0.0, "dynamic_score_utility": 0.0}


def auto_considered(visits: int) -> int:
    """Root moves for Gumbel's sequential halving in play: a quarter of the visits, 2 to 16.

    With no more visits than candidates every visit goes to a different root
    move and none deeper; against PUCT with the reference net, a quarter of the
    visits won 55-70% at 8-32 visits where 16 candidates won about 30%
    (docs/papers.md).
    """
    return min(16, max(2, int(visits) // 4))


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


class SearchPlayer:
    """Tree search (``gojax.search``) with a KataGo network, without root noise.

    ``search`` is ``"puct"`` (AlphaGo Zero), ``"katago"`` (KataGo's PUCT,
    ``gojax._selection.katago_puct``) or ``"gumbel"`` (Gumbel MuZero:
    sequential halving over moves sampled without replacement, then the best
    of them by prior and searched value). ``gumbel_scale`` scales the noise of
    that sampling: 0 (default) searches the network's favourites, which plays
    stronger (docs/papers.md); 1 is the paper's, whose guarantee is over the
    noise, for self-play. ``considered`` is how many root moves Gumbel samples
    (None: :func:`auto_considered`, a quarter of the visits; mctx's default is
    16): with no more visits than that, every visit goes to a different root
    move and none deeper.

    Every search runs ``visits`` simulations in one jitted call (a visit
    budget is static in the compiled program). Between PUCT moves the
    subtree below the moves played since the last search is kept and
    continued (``gojax.search.reuse_subtree``), so only the missing visits
    are run; Gumbel starts every search fresh (its root budget assumes an
    unvisited root).

    Time: ``warmup`` compiles and times one search (and compiles the search
    that stops early); when the deadline leaves less than ``time_factor`` times
    that, the search stops at the root visits that fit (``visits + 1`` times
    the share of that time left; ``gojax.search.search``'s ``stop_at``), and
    with less time than two visits need (or with Gumbel, whose halving plans
    the whole budget) the move comes from the raw policy (one evaluation), so
    a timed game is never lost by searching. A search that may be stopped
    (``analyze``'s ``stop``, KataGo's ``_cancellable`` commands) runs in
    ``STOPPABLE_PARTS`` resumed parts and ends after the part during which it
    was stopped, with the visits it has.

    Score leads (the root's and each listed move's) are the search's means
    over the subtree, as KataGo reports them, for nets with a score head; one
    network evaluation of the position after each listed move (batched with
    the root's, which gives ownership) gives the rest of a move's numbers.

    ``rollout_lambda`` > 0 values each leaf as AlphaGo did,
    ``(1 - lambda) * v + lambda * z`` with ``z`` the mean of ``rollouts``
    random games from it (``gojax.uct.mixed_evaluator``; AlphaGo: 0.5, one
    rollout of its fast rollout policy). The rollouts' moves are uniform over
    those that keep the mover's own eyes, or drawn from a fast rollout policy
    (``rollout_weights``, ``gojax.rollout_policy``).

    ``optimism``: ``(root, below)`` policy optimism of a net with KataGo's
    optimistic policy head (:func:`policy_optimism`; KataGo's engines search
    with (0.2, 1.0)): the root's prior, and the policy the analysis reports, mix
    in ``root`` of it, every other node's ``below``.

    ``lcb``: play the move KataGo's ``useLcbForSelection`` plays (not Gumbel):
    the best lower confidence bound on the value among the root moves with at
    least 15% of the most visits (``SearchConfig.lcb_selection``).

    ``score_utility``: with ``search="katago"``, weigh the score as KataGo
    does (``SearchConfig.static_score_utility`` / ``dynamic_score_utility``,
    for nets with a score head); False searches on the win-loss value alone.

    ``moves``: the move set searched at every node (``SearchConfig.moves``): ``"legal"``,
    or ``"sensible"`` for a net trained by self-play over that set (no filling of one's
    own eyes; a pass only after a pass or with nothing else to play).

    ``root_symmetry_pruning``: at a symmetric position search one move of each set of
    equivalent moves and report them all (``SearchConfig.root_symmetry_pruning``;
    KataGo's GTP default, as here).
    """

    def __init__(
        self,
        model: Any,
        *,
        symmetry: int | str = "random",
        optimism: tuple[float, float] = (0.0, 0.0),
        visits: int = 64,
        max_listed: int = 16,
        time_factor: float = 1.5,
        ponder_visits: int | None = None,
        c_puct: float = 1.25,
        search: str = "puct",
        gumbel_scale: float = 0.0,
        considered: int | None = None,
        rollout_lambda: float = 0.0,
        rollouts: int = 1,
        rollout_weights: Any = None,
        lcb: bool = False,
        score_utility: bool = True,
        root_symmetry_pruning: bool = True,
        moves: str = "legal",
    ) -> None:
        from gojax.evaluate import check_symmetry
        from gojax.search import SearchConfig

        if search not in SEARCH_KINDS:
            raise ValueError(f"search must be one of {SEARCH_KINDS}, not {search!r}")
        if not 0.0 <= rollout_lambda <= 1.0:
            raise ValueError(f"rollout_lambda must be in [0, 1], not {rollout_lambda}")
        if rollouts < 1:
            raise ValueError(f"rollouts must be >= 1, not {rollouts}")
        fast = rollout_weights is not None
        if fast and not rollout_lambda:
            raise ValueError("a rollout policy needs rollout_lambda > 0 (the rollouts are unused)")
        if lcb and search == "gumbel":
            raise ValueError("lcb move selection needs a PUCT search (Gumbel picks its own move)")
        utility_settings = score_utility_settings(search, score_utility)
        symmetry = check_symmetry(symmetry)
        config = SearchConfig(
            kind=search,
            num_simulations=int(visits),
            pb_c_init=c_puct,
            dirichlet_fraction=0.0,
            temperature_moves=0,
            gumbel_scale=float(gumbel_scale),
            max_num_considered_actions=int(considered or auto_considered(visits)),
            lcb_selection=bool(lcb),
            root_symmetry_pruning=bool(root_symmetry_pruning),
            moves=moves,
            **utility_settings,
        )
        mixed = f", lambda {rollout_lambda:g} x {rollouts} rollouts" if rollout_lambda else ""
        mixed += " of the fast policy" if fast else ""
        self._extras = mixed + optimism_label(optimism)  # of the name: fixed once built
        self._auto_considered = considered is None
        functions = _search_functions(
            model,
            symmetry,
            float(rollout_lambda),
            int(rollouts),
            fast_rollouts=fast,
            optimism=(float(optimism[0]), float(optimism[1])),
        )
        self._setup(
            _WithRolloutPolicy(model, rollout_weights) if fast else model,
            # A net whose heads fix the board size says so (``TrainedModel`` of an AGZ net).
            board_sizes=getattr(model, "board_sizes", None),
            symmetry=symmetry,
            config=config,
            functions=functions,
            max_listed=max_listed,
            time_factor=time_factor,
            ponder_visits=ponder_visits,
        )

    @property
    def name(self) -> str:
        kind = self.config.kind
        prefix = "search" if kind == "puct" else f"{kind} search"
        extras = self._extras + (", LCB move" if self.config.lcb_selection else "")
        if kind == "katago" and not self.config.weighs_scores:
            extras += ", value only"
        return f"{prefix}({self.model.name}, {self.visits} visits{extras})"

    def _setup(
        self,
        model,
        *,
        board_sizes,
        symmetry,
        config,
        functions,
        max_listed,
        time_factor,
        ponder_visits=None,
    ) -> None:
        """State shared by every search player; ``functions`` as ``_search_functions`` gives."""
        self.model = model
        self.has_ownership = knows_ownership(model)
        self.board_sizes = board_sizes
        self.symmetry = symmetry
        self.config = config
        self.visits = config.num_simulations
        self.max_listed = int(max_listed)
        self.time_factor = float(time_factor)
        self._ponder_visits = None
        if ponder_visits is not None:
            self.ponder_visits = ponder_visits
        # KataGo's analysisWideRootNoise: pondering (lz-analyze, kata-analyze) searches
        # with it, moves with the config's own wide_root_noise (0 unless set).
        self.analysis_wide_root_noise = ANALYSIS_WIDE_ROOT_NOISE if config.kind == "katago" else 0.0
        self._search, self._evaluate, self._reuse = functions
        self._empty: dict[tuple, Any] = {}
        self._seconds: dict[tuple, float] = {}
        self.new_game()

    def new_game(self) -> None:
        self._tree = None
        self._root: GoState | None = None
        # The game's position (its moves seen) where ``_root`` was shown without them.
        self._game: GoState | None = None

    def set_search(self, visits: int | None = None, **fields: Any) -> None:
        """Search from now on with ``visits`` simulations (0: the network's policy alone,
        one evaluation) and these ``SearchConfig`` fields changed; ``ValueError`` (and
        nothing changed) if the config refuses them.

        Each new config is a new compiled program: call :meth:`warmup` before a timed
        move. The kept tree is dropped, as KataGo drops its search on a change; the
        clock's measure of a search is scaled to the new budget until then.
        """
        if visits is not None and visits < 0:
            raise ValueError(f"visits must be >= 0, not {visits}")
        new_visits = self.visits if visits is None else int(visits)
        if new_visits != self.visits:
            fields["num_simulations"] = max(new_visits, 1)
            if self._auto_considered:
                fields["max_num_considered_actions"] = auto_considered(max(new_visits, 1))
        config = dataclasses.replace(self.config, **fields)  # checks the fields
        scale = (max(new_visits, 1) + 1) / (max(self.visits, 1) + 1)
        self._seconds = {kind: seconds * scale for kind, seconds in self._seconds.items()}
        self.config, self.visits = config, new_visits
        self._empty.clear()
        self.new_game()

    @staticmethod
    def _kind(state: GoState) -> tuple:
        return (state.size, state.rules.name, state.max_moves)

    def _empty_tree(self, state: GoState):
        """An all-zero tree of the right shapes: ``search`` treats it as no tree."""
        kind = self._kind(state)
        if kind not in self._empty:
            shapes = jax.eval_shape(
                functools.partial(self._search, config=self.config, tree=None, avoid=None),
                self.model.variables,
                _batch(state),
                jax.random.key(0),
            ).tree
            self._empty[kind] = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)
        return self._empty[kind]

    def _start_tree(self, state: GoState, game: GoState | None = None, key=None):
        """The kept subtree for ``state`` if the moves since the last search are known.

        ``game``: ``state`` with the game's moves, where ``state`` hides them; a tree
        kept from such a search serves only such searches (KataGo's GTP engine also
        starts again between analysing and moving), followed down the game's moves
        and its root shown as ``state`` and re-evaluated (``gojax.search.show_roots``).
        """
        if self.config.kind == "gumbel":
            return None  # never continued (``gojax.search.search`` refuses a tree)
        if self._tree is None or self._root is None or self._kind(self._root) != self._kind(state):
            return self._empty_tree(state)
        if (game is None) != (self._game is None):
            return self._empty_tree(state)
        now, then = (state, self._root) if game is None else (game, self._game)
        played = int(now.move_number) - int(then.move_number)
        if not 0 <= played <= len(now.recent_moves):
            return self._empty_tree(state)
        tree = self._tree
        # ``search`` checks that the root is exactly ``state``; a wrong guess costs nothing.
        for action in np.asarray(now.recent_moves[:played])[::-1]:
            if action < 0:
                return self._empty_tree(state)
            tree = self._reuse(tree, jnp.asarray([action], jnp.int32))
        if game is not None and played > 0:
            from gojax.search import policy_logits, show_roots

            # The new root was searched as a child, shown the move that led to it.
            out = self._evaluations(state, [], jax.random.key(0) if key is None else key)
            logits = policy_logits(out["policy"][:1].astype(np.float32))
            tree = _jitted(show_roots)(tree, _batch(state), logits)
        return tree

    def _evaluations(self, state: GoState, actions: list[int], key: jax.Array) -> dict:
        """Root and after-move evaluations: ``[1 + max_listed]`` rows of each output."""
        padded = (actions + [state.num_actions - 1] * self.max_listed)[: self.max_listed]
        out = self._evaluate(self.model.variables, state, jnp.asarray(padded, jnp.int32), key)
        return {k: np.asarray(v) for k, v in out.items()}

    def _policy(self, state: GoState, key: jax.Array, allowed=None) -> Analysis:
        out = self._evaluations(state, [], key)
        mover = int(state.to_play)
        white_win = float(out["white_win"][0] + 0.5 * out["no_result"][0])
        # The raw network's view over the moves this search would consider.
        legal = out["legal"][0] & np.asarray(self.config.allowed(state))
        return _policy_analysis(
            out["policy"][0],
            legal,
            white_win if mover == -1 else 1.0 - white_win,
            float(out["white_lead"][0]) * -mover,
            float(out["score_stdev"][0]),
            (out["white_ownership"][0] * -mover).astype(np.float32),
            allowed=allowed,
            no_result=float(out["no_result"][0]),
            score_selfplay=float(out["white_score_selfplay"][0]) * -mover,
            raw_errors=raw_errors(out),
        )

    def _visits_that_fit(self, left: float, needed: float) -> int:
        """The root visits a search can reach in ``left`` seconds when a whole one
        (``visits + 1``) needs ``needed``; 0 for Gumbel (its halving plans the whole
        budget: it is never cut short) or an unmeasured search."""
        if self.config.kind == "gumbel" or not math.isfinite(needed) or needed <= 0:
            return 0
        return int((self.visits + 1) * max(left, 0.0) / needed)

    def _searched(
        self, state: GoState, key: jax.Array, avoid=None, stop_at: int | None = None
    ) -> Analysis:
        """A search of ``state`` from the kept tree, stopped at ``stop_at`` root visits
        if given (the search of its budget, cut short)."""
        key_search, key_eval = jax.random.split(key)
        tree = self._start_tree(state)
        plies = np.zeros((2, state.num_actions), np.int32) if avoid is None else avoid
        stop = {} if stop_at is None else {"stop_at": jnp.int32(stop_at)}
        result = self._search(
            self.model.variables, _batch(state), key_search, self.config, tree, plies[None], **stop
        )
        self._keep(state, result.tree, plies)
        return self._result_analysis(state, result, key_eval)

    def _keep(self, state: GoState, tree: Any, plies: np.ndarray, game=None) -> None:
        """Keep a search's tree of ``state`` (shown without the moves of ``game``, if
        given) for the next search, unless moves were kept out of it (``plies``) or it
        is Gumbel's: neither is continued."""
        keep = not np.any(plies) and self.config.kind != "gumbel"
        self._tree, self._root, self._game = (tree, state, game) if keep else (None, None, None)

    def _result_analysis(self, state: GoState, result: Any, key) -> Analysis:
        """The analysis of a search of ``state`` (its ``SearchOutput``)."""
        host = jax.device_get(result)
        listed = listed_actions(host, 0, self.max_listed)
        out = self._evaluations(state, listed, key)
        return search_analysis(host, 0, listed, out, int(state.to_play))

    @property
    def ponder_visits(self) -> int:
        """The root visits pondering grows a search to: as the player was made with, else
        ``PONDER_FACTOR`` moves' worth or ``PONDER_LEAST`` for small budgets; never
        fewer than one move's."""
        default = max(PONDER_FACTOR * (self.visits + 1), PONDER_LEAST)
        return max(self._ponder_visits or default, self.visits + 1)

    @ponder_visits.setter
    def ponder_visits(self, visits: int) -> None:
        # A new budget is a new compiled search, made at the next ponder.
        if visits < 1:
            raise ValueError(f"ponder_visits must be positive, not {visits}")
        self._ponder_visits = int(visits)

    def _parts(
        self,
        state: GoState,
        key: jax.Array,
        avoid,
        config: Any,
        target: int,
        step: int,
        game: GoState | None = None,
    ) -> Iterator[Callable[[], Analysis]]:
        """One search of ``state`` (``config``) from the tree kept for it up to ``target``
        root visits, in parts of ``step`` visits that resume it (``gojax.search.search``:
        together they are the search run at once), each kept (:meth:`_keep`) as it
        ends; after each part, the analysis of the search so far, to take or not.
        ``game``: as :meth:`_start_tree`'s."""
        # The parts' keys are ``fold_in(key, part)``; a shown root's evaluation takes its
        # own, far from them.
        tree = self._start_tree(state, game, jax.random.fold_in(key, 2**31 - 1))
        plies = np.zeros((2, state.num_actions), np.int32) if avoid is None else avoid
        done = 1 if tree is None else max(1, int(tree.node_visits[0, 0]))
        resume, part = False, 0
        while True:
            goal = min(target, done + step)
            key_search, key_eval = jax.random.split(jax.random.fold_in(key, part))
            result = self._search(
                self.model.variables,
                _batch(state),
                key_search,
                config,
                tree,
                plies[None],
                stop_at=jnp.int32(goal),
                resume=resume,
            )
            tree, resume, part = result.tree, True, part + 1
            self._keep(state, tree, plies, game)
            done = max(goal, int(result.tree.node_visits[0, 0]))
            yield functools.partial(self._result_analysis, state, result, key_eval)
            if done >= target:
                return

    def _pondered(
        self, state: GoState, key: jax.Array, avoid=None, game=None
    ) -> Iterator[Analysis]:
        """Analyses of one search growing by ``PONDER_PARTS``-ths of ``ponder_visits``
        (at least a move's visits each), from the tree kept for ``state`` (``game``: as
        :meth:`_start_tree`'s), up to ``ponder_visits``; KataGo's PUCT searches with
        ``analysis_wide_root_noise``."""
        config = dataclasses.replace(
            self.config,
            num_simulations=self.ponder_visits - 1,
            wide_root_noise=self.analysis_wide_root_noise,
        )
        step = max(self.visits + 1, self.ponder_visits // PONDER_PARTS)
        parts = self._parts(state, key, avoid, config, self.ponder_visits, step, game)
        for analysis in parts:
            yield analysis()

    def _thinking(self, state: GoState, key: jax.Array) -> Iterator[Callable[[], Analysis]]:
        """The parts of a search of ``state`` as a move's (its own settings, the game's
        history seen) grown to ``ponder_visits`` root visits, each a
        ``STOPPABLE_PARTS``-th of a move's visits, so that a stop waits little."""
        config = dataclasses.replace(self.config, num_simulations=self.ponder_visits - 1)
        step = max(1, (self.visits + 1) // STOPPABLE_PARTS)
        return self._parts(state, key, None, config, self.ponder_visits, step)

    def think(
        self, state: GoState, *, key: jax.Array, stop: threading.Event, deadline=None
    ) -> None:
        """KataGo's pondering (``ponderingEnabled``): grow the kept tree of ``state``
        while the opponent thinks, until ``stop`` is set, ``deadline`` passes or the
        root has ``ponder_visits`` visits; a later move's search of ``state``, or of a
        position after it, goes on from the tree. Gumbel keeps no tree: nothing."""
        if self.config.kind == "gumbel" or self.visits == 0:
            return
        for _ in self._thinking(state, key):
            if stop.is_set() or (deadline is not None and _now() >= deadline):
                return

    def warmup_thinking(self, state: GoState) -> None:
        """Compile what :meth:`think` runs (a first part and a resumed one)."""
        if self.config.kind == "gumbel" or self.visits == 0:
            return
        self.new_game()
        parts = self._thinking(_live(state), jax.random.key(0))
        next(parts)
        next(parts, None)
        self.new_game()

    def _stoppable(
        self, state: GoState, key: jax.Array, avoid, stop: threading.Event, deadline, target: int
    ) -> Analysis:
        """A search of ``state`` to ``target`` root visits from the kept tree, run in
        ``STOPPABLE_PARTS`` parts and ended after the part during which ``stop`` was set
        or ``deadline`` passed."""
        step = max(1, target // STOPPABLE_PARTS)
        for analysis in self._parts(state, key, avoid, self.config, target, step):
            if stop.is_set() or (deadline is not None and _now() >= deadline):
                return analysis()  # cut short
        return analysis()  # the whole search

    def analyze(
        self, state, *, visits, key, deadline=None, progress=None, avoid=None, stop=None
    ) -> Analysis:
        needed = self._seconds.get(self._kind(state), math.inf) * self.time_factor
        left = math.inf if deadline is None else deadline - _now()
        # The root visits the time allows (the whole search's when it fits).
        fit = self.visits + 1 if left >= needed else self._visits_that_fit(left, needed)
        if self.visits == 0 or fit < 2:  # the network alone: set so, or no time to search
            analysis = self._policy(state, key, root_moves(avoid, int(state.to_play)))
        elif stop is not None and self.config.kind != "gumbel":  # Gumbel: never cut short
            analysis = self._stoppable(state, key, avoid, stop, deadline, fit)
        else:
            analysis = self._searched(state, key, avoid, None if left >= needed else fit)
        if progress is not None:
            progress(analysis)
        return analysis

    def ponder(
        self, state: GoState, *, key: jax.Array, avoid=None, game=None
    ) -> Iterator[Analysis]:
        key_policy, key_search = jax.random.split(key)
        # At once, while the search runs.
        analysis = self._policy(state, key_policy, root_moves(avoid, int(state.to_play)))
        yield analysis
        for analysis in self._pondered(state, key_search, avoid, game):  # deeper and deeper
            yield analysis
        while True:  # as deep as pondering goes
            yield analysis

    def evaluate(self, state: GoState) -> Analysis:
        return self._policy(state, jax.random.key(0))

    def warmup(self, state: GoState) -> None:
        state = _live(state)
        self._policy(state, jax.random.key(0))
        self.new_game()
        self._searched(state, jax.random.key(0))  # compiles
        start = _now()
        self.new_game()
        self._searched(state, jax.random.key(1))
        self._seconds[self._kind(state)] = _now() - start
        if self.config.kind != "gumbel":  # compiles the search cut short by the clock
            self.new_game()
            self._searched(state, jax.random.key(2), stop_at=2)
        self.new_game()


@dataclasses.dataclass(frozen=True)
class _NoNetwork:
    """What a network-free search player holds where others hold a model."""

    name: str
    variables: Any = None
    has_ownership: bool = False


class _WithRolloutPolicy:
    """A model whose ``variables`` also carry a rollout policy's weights:
    ``(network variables, weights)``, as ``_search_functions(fast_rollouts=True)`` reads them."""

    def __init__(self, model: Any, weights: Any) -> None:
        self._model = model
        self.variables = (model.variables, weights)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


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
    """``_search_functions``' three functions for :class:`UCTPlayer` (``variables``: the
    rollout policy's weights, or None for uniform rollouts)."""
    from gojax.search import reuse_subtree, search
    from gojax.uct import rollout_evaluator

    @functools.partial(jax.jit, static_argnames=("config", "resume"))
    def run_search(variables, states, key, config, tree, avoid, stop_at=None, resume=False):
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

    return run_search, run_evaluate, jax.jit(reuse_subtree)


def _search_functions(
    model: Any,
    symmetry: int | str,
    rollout_lambda: float = 0.0,
    rollouts=1,
    *,
    fast_rollouts: bool = False,
    optimism: tuple[float, float] = (0.0, 0.0),
):
    """Jitted ``search(variables, states, key, config, tree, avoid)``, root-and-children evaluation
    ``(variables, state, actions [K], key) -> outputs [1 + K, ...]`` and ``reuse_subtree``.
    ``rollout_lambda`` > 0 mixes random rollouts into the leaf values (AlphaGo); with
    ``fast_rollouts`` the ``variables`` are ``(network variables, rollout policy weights)``
    (:class:`_WithRolloutPolicy`) and that policy plays the rollouts. ``optimism``:
    ``(root, below)`` policy optimism; the root-and-children evaluation uses the root's."""
    from gojax.evaluate import evaluate
    from gojax.search import katago_evaluator, reuse_subtree, search
    from gojax.uct import mixed_evaluator

    version = model.output_spec
    net, root_net = optimism_modules(model, optimism)

    @functools.partial(jax.jit, static_argnames=("config", "resume"))
    def run_search(variables, states, key, config, tree, avoid, stop_at=None, resume=False):
        variables, weights = variables if fast_rollouts else (variables, None)

        def leaf_evaluator(module):
            # Every node's ownership, for the tree's mean at the root (one game: cheap).
            evaluator = katago_evaluator(
                (module, variables, version), symmetry=symmetry, ownership=True
            )
            if rollout_lambda:
                evaluator = mixed_evaluator(evaluator, rollout_lambda, rollouts, weights=weights)
            return evaluator

        root_evaluator = None if root_net is None else leaf_evaluator(root_net)
        return search(
            leaf_evaluator(net),
            states,
            key,
            config,
            tree,
            avoid,
            root_evaluator=root_evaluator,
            stop_at=stop_at,
            resume=resume,
        )

    @jax.jit
    def run_evaluate(variables, state, actions, key):
        if fast_rollouts:
            variables = variables[0]
        children = jax.vmap(play, in_axes=(None, 0))(state, actions)
        states = jax.tree.map(lambda r, c: jnp.concatenate([r[None], c]), state, children)
        return evaluate(
            root_net or net, variables, states, version=version, symmetry=symmetry, key=key
        )

    return run_search, run_evaluate, jax.jit(reuse_subtree)


def listed_actions(host: Any, index: int, max_listed: int) -> list[int]:
    """The root moves to report for game ``index`` of a host-side ``SearchOutput``.

    The chosen move first, then the other visited moves by visits (ties: the
    higher prior), at most ``max_listed``.
    """
    visits = host.visit_counts[index]
    prior = np.asarray(jax.nn.softmax(host.tree.children_prior_logits[index, 0]))
    chosen = int(host.action[index])
    visited = [int(a) for a in np.lexsort((prior, visits)) if visits[a] > 0][::-1]
    return ([chosen] + [a for a in visited if a != chosen])[:max_listed]


def pv_visits(tree: Any, index: int, pv: tuple[int, ...]) -> tuple[int, ...]:
    """Visits of the edges along ``pv`` from the root of game ``index`` of a host tree."""
    visits, node = [], 0
    for action in pv:
        if node < 0:
            break
        visits.append(int(tree.children_visits[index, node, action]))
        node = int(tree.children_index[index, node, action])
    return tuple(visits)


def search_analysis(
    host: Any,
    index: int,
    listed: list[int],
    out: dict[str, np.ndarray],
    mover: int,
    *,
    pv_length: int = 24,
) -> Analysis:
    """The :class:`Analysis` of game ``index`` of a host-side ``SearchOutput``.

    Win rates, utilities and scores (the root's and each visited move's) are the
    search's means, as KataGo reports them; ``lcb`` and ``utility_lcb`` are KataGo's
    bounds on them. So is the root's ownership when the search kept its nodes'
    (``host.ownership``); otherwise it is the root's own evaluation (``out``). A move
    never searched takes the network's numbers after it.

    Args:
      host: ``jax.device_get`` of a ``gojax.search.SearchOutput`` (its tree
        needs the fields ``principal_variation`` reads, the root's prior logits and the
        nodes' players, ``embeddings.to_play``).
      listed: the root moves to report, from :func:`listed_actions`.
      out: network outputs of the root (row 0) and of the position after each
        listed move (row ``1 + i``): ``[1 + K, ...]`` arrays, ``K >= len(listed)``.
      mover: the player to move at the root, +1 black, -1 white.
      pv_length: longest principal variation, first move included.
    """
    from gojax.search import (
        lower_confidence_bounds,
        principal_variation,
        subtree_score_distributions,
    )

    visits = host.visit_counts[index]
    prior = np.asarray(jax.nn.softmax(host.tree.children_prior_logits[index, 0]))
    winrates = (np.clip(host.q_values[index], -1.0, 1.0) + 1.0) / 2.0
    utilities, q_stdev = (np.asarray(x[index], np.float64) for x in (host.utilities, host.q_stdev))
    radius = float(host.utility_radius[index])
    # KataGo's bound on the utility, and the win rate less its radius scaled by the value's
    # share of the utility (KataGo's "hacked" lcb, on the win-rate scale); 0 without visits,
    # as Leela Zero.
    utility_bounds = lower_confidence_bounds(utilities, visits, q_stdev, radius=radius)
    bounds = winrates - (utilities - utility_bounds) / (2.0 * radius)
    bounds = np.where(visits > 0, np.clip(bounds, 0.0, 1.0), 0.0)
    # The score distributions below the root (row 0) and each listed move, where the
    # network gives one; else (nets without a score head, UCT) each position's own.
    distributed = float(out["score_stdev"][0]) > 0
    if distributed:
        selfplay, spread = subtree_score_distributions(host.tree, index, listed)
    own_selfplay = out["white_score_selfplay"] * -mover

    def lead(i: int, a: int) -> float:  # the mover's lead after listed move i, action a
        if visits[a] > 0:  # the search's mean (0 for nets without a score head, and UCT)
            return _finite(float(host.score_values[index, a]))
        return _finite(float(out["white_lead"][1 + i]) * -mover)

    def score(row: int) -> tuple[float, float]:  # (scoreSelfplay, scoreStdev) of a row
        if distributed and np.isfinite(selfplay[row]):
            return _finite(float(selfplay[row])), _finite(float(spread[row]))
        return _finite(float(own_selfplay[row])), _finite(float(out["score_stdev"][row]))

    scores = [score(1 + i) for i in range(len(listed))]
    moves = tuple(
        MoveInfo(
            action=a,
            visits=int(visits[a]),
            winrate=float(winrates[a]),
            score_lead=lead(i, a),
            prior=float(prior[a]),
            lcb=float(bounds[a]),
            order=i,
            pv=(pv := tuple(principal_variation(host.tree, index, a, pv_length))),
            pv_visits=pv_visits(host.tree, index, pv),
            no_result=float(out["no_result"][1 + i]),
            utility=float(utilities[a]) if visits[a] > 0 else 2.0 * float(winrates[a]) - 1.0,
            utility_lcb=float(utility_bounds[a]),
            score_selfplay=scores[i][0],
            score_stdev=scores[i][1],
        )
        for i, a in enumerate(listed)
    )
    root_value = float(np.clip(host.root_value[index], -1.0, 1.0))
    # The tree's mean ownership where the search kept it (KataGo's), else the root's own.
    tracked = host.ownership.shape[-1] > 0
    nodes_tracked = host.tree.raw_ownership.shape[-1] > 0

    @functools.cache
    def moves_ownership() -> tuple[np.ndarray, np.ndarray]:
        from gojax.search import subtree_ownership

        means, stdevs = subtree_ownership(host.tree, index, listed)  # Black's view
        # A move never searched: the network's view of the position after it.
        after = -out["white_ownership"][1 : 1 + len(listed)]
        searched = np.all(np.isfinite(means), axis=1, keepdims=True)
        means = np.where(searched, means, after) * mover
        stdevs = np.where(searched, stdevs, 0.0)
        return means.astype(np.float32), stdevs.astype(np.float32)

    root_ownership = host.ownership[index] if tracked else -out["white_ownership"][0]
    root_selfplay, root_spread = score(0)
    symmetries = np.asarray(host.root_symmetries[index])
    if symmetries[1:].any():  # a symmetric root: every move the searched ones stand for
        moves, moves_ownership = _symmetric_copies(
            moves, moves_ownership, symmetries, host.tree.children_prior_logits[index, 0]
        )
    return Analysis(
        moves=moves,
        visits=int(visits.sum()) + 1,
        winrate=(root_value + 1.0) / 2.0,
        score_lead=_finite(float(host.root_score[index])),
        score_stdev=root_spread,
        ownership=(root_ownership * mover).astype(np.float32),
        ownership_stdev=host.ownership_stdev[index] if tracked else None,
        moves_ownership=moves_ownership if nodes_tracked else None,
        utility=_finite(float(host.root_utility[index])),
        score_selfplay=root_selfplay,
        raw_errors=raw_errors(out),
    )


def _symmetric_copies(
    moves: tuple[MoveInfo, ...],
    moves_ownership: Callable[[], tuple[np.ndarray, np.ndarray]],
    symmetries: np.ndarray,
    root_logits: np.ndarray,
) -> tuple[tuple[MoveInfo, ...], Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """``moves`` of a root that the board ``symmetries [8]`` leave unchanged, each
    followed by the moves equivalent to it (its images, with its numbers, its
    principal variation carried over and ``symmetry_of`` set), each move once and none
    the root kept out (``root_logits [A]`` illegal), as KataGo lists them; and their
    ``moves_ownership``, each copy's map carried over likewise."""
    from gojax.search import (
        ILLEGAL_THRESHOLD,
        symmetric_moves,
        transform_actions,
        transform_point_values,
    )

    size = math.isqrt(len(root_logits) - 1)
    allowed = np.asarray(root_logits) > ILLEGAL_THRESHOLD
    copies: list[tuple[int, int, MoveInfo]] = []  # (searched move's index, symmetry, copy)
    done: set[int] = set()
    for k, info in enumerate(moves):
        for symmetry, image in symmetric_moves(info.action, size, symmetries):
            if image in done or not allowed[image]:
                continue
            done.add(image)
            copy = dataclasses.replace(
                info,
                action=image,
                order=len(copies),
                pv=transform_actions(info.pv, size, symmetry),
                symmetry_of=info.action if symmetry else None,
            )
            copies.append((k, symmetry, copy))

    @functools.cache
    def copied_ownership() -> tuple[np.ndarray, np.ndarray]:
        means, stdevs = moves_ownership()
        pairs = [
            (transform_point_values(means[k], size, s), transform_point_values(stdevs[k], size, s))
            for k, s, _ in copies
        ]
        return np.stack([m for m, _ in pairs]), np.stack([d for _, d in pairs])

    return tuple(c for _, _, c in copies), copied_ownership


def _now() -> float:
    return time.monotonic()


def _finite(x: float, default: float = 0.0) -> float:
    return x if math.isfinite(x) else default
