"""The tree-search player of :mod:`eval.players`: :class:`SearchPlayer`.

Tree search (``gojax.search``) with a network: visit budgets and deadlines, tree
reuse between moves, pondering (``lz-analyze``, ``kata-analyze``, KataGo's
``ponderingEnabled``) and searches that stop early, in resumed parts; and the jitted
search and evaluation functions it runs (:func:`_search_functions`). Reading a finished
search into an :class:`eval.players.Analysis` is ``eval._players_search_analysis``;
the network-free UCT player built on this class is ``eval._players_uct``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from eval._nn_tables import NNTables
from eval._players_analysis import (
    Analysis,
    _batch,
    _jitted,
    _live,
    _now,
    _policy_analysis,
    knows_ownership,
    raw_errors,
    root_moves,
)
from eval._players_search_analysis import listed_actions, search_analysis
from eval._players_settings import (
    PLAY_LCB,
    auto_considered,
    optimism_label,
    optimism_modules,
    score_utility_settings,
)
from eval.katago_names import ANALYSIS_WIDE_ROOT_NOISE
from gojax import GoState, play

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
# The after-move rows an analysis evaluates besides the root's: the first of these that
# holds its listed moves, else ``max_listed``. A search of a few dozen visits lists a
# handful of moves (9x9 at 64 visits: 5 on average), and 16 rows always were most of the
# time of a review going back, whose searches the network cache serves.
LISTED_ROWS = (0, 4, 8)


class SearchPlayer:
    """Tree search (``gojax.search``) with a KataGo network, without root noise.

    ``search`` is ``"puct"`` (AlphaGo Zero), ``"katago"`` (KataGo's PUCT,
    ``gojax._selection.katago_puct``) or ``"gumbel"`` (Gumbel MuZero:
    sequential halving over moves sampled without replacement, then the best
    of them by prior and searched value). ``gumbel_scale`` scales the noise of
    that sampling: 0 (default) searches the network's favourites, which plays
    stronger (docs/papers/alphago.md); 1 is the paper's, whose guarantee is over the
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
    the best lower confidence bound on the utility among the root moves with at
    least 15% of the most visits (``SearchConfig.lcb_selection``), with the bound's
    settings of ``PLAY_LCB`` (3 standard errors, a spread of at least 0.4).

    ``score_utility``: with ``search="katago"``, weigh the score as KataGo
    does (``SearchConfig.static_score_utility`` / ``dynamic_score_utility``,
    for nets with a score head); False searches on the win-loss value alone.

    ``moves``: the move set searched at every node (``SearchConfig.moves``): ``"legal"``,
    or ``"sensible"`` for a net trained by self-play over that set (no filling of one's
    own eyes; a pass only after a pass or with nothing else to play).

    ``root_symmetry_pruning``: at a symmetric position search one move of each set of
    equivalent moves and report them all (``SearchConfig.root_symmetry_pruning``;
    KataGo's GTP default, as here).

    ``nn_cache``: keep the network's evaluations of ``2 ** nn_cache`` positions between
    searches (KataGo's ``nnCacheSizePowerOfTwo``; ``gojax.search.new_cache``), one table
    per board size, so that a position searched again (reviewing a game back and forth,
    a second query) is not evaluated again; 0 keeps none. Not with ``rollout_lambda``
    (the rollouts are random: a stored leaf value would be one draw kept for good).
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
        nn_cache: int = 0,
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
        if nn_cache and rollout_lambda:
            raise ValueError("a network cache cannot keep rollout values: nn_cache 0 with them")
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
            **(PLAY_LCB if lcb else {}),
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
            nn_cache=nn_cache,
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
        nn_cache=0,
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
        self._search, self._evaluate, self._reuse, self._new_cache = functions
        if nn_cache and self._new_cache is None:
            raise ValueError("this player keeps no network cache: nn_cache 0")
        self.nn_cache = int(nn_cache)
        self._caches = NNTables(nn_cache)  # by board kind
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
        """Root and after-move evaluations: ``[1 + K]`` rows of each output, ``K`` the first
        of ``LISTED_ROWS`` (or ``max_listed``) that holds ``actions``, passes after them."""
        rows = next((k for k in LISTED_ROWS if k >= len(actions)), self.max_listed)
        rows = min(rows, self.max_listed)
        padded = (actions + [state.num_actions - 1] * rows)[:rows]
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
        result = self._cached_search(state, key_search, self.config, tree, plies[None], **stop)
        self._keep(state, result.tree, plies)
        return self._result_analysis(state, result, key_eval)

    def _cached_search(self, state: GoState, key, config, tree, avoid, **kwargs) -> Any:
        """``self._search`` of ``state`` through the board kind's network cache, if kept
        (``eval._nn_tables``: donated, and replaced by the one the search gives back)."""
        kind = self._kind(state)
        cache = self._caches.take(kind, functools.partial(self._empty_cache, state))
        result = self._search(
            self.model.variables, _batch(state), key, config, tree, avoid, cache=cache, **kwargs
        )
        self._caches.keep(kind, result.cache)
        return result

    def cache_stats(self) -> dict[str, int] | None:
        """The network cache's counters summed over its tables (``lookups``, ``hits``,
        ``size``, ``filled``), or None without a cache."""
        return self._caches.stats()

    def _empty_cache(self, state: GoState, size_log2: int) -> Any:
        """A new network cache of ``2 ** size_log2`` positions shaped as ``state``."""
        return self._new_cache(self.model.variables, _batch(state), size_log2)

    def clear_cache(self) -> None:
        """Forget every stored evaluation (a timed search must not find its position)."""
        self._caches.clear()

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
            result = self._cached_search(
                state, key_search, config, tree, plies[None], stop_at=jnp.int32(goal), resume=resume
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
        for rows in (*LISTED_ROWS, self.max_listed):  # each size of a move's evaluations
            self._evaluations(state, [state.num_actions - 1] * rows, jax.random.key(0))
        self.new_game()
        self._searched(state, jax.random.key(0))  # compiles
        self.new_game()
        self.clear_cache()  # timed as a new position, whose evaluations are not stored
        kind = self._kind(state)  # the empty table made before the clock starts
        self._caches.keep(
            kind, self._caches.take(kind, functools.partial(self._empty_cache, state))
        )
        start = _now()
        self._searched(state, jax.random.key(1))
        self._seconds[self._kind(state)] = _now() - start
        if self.config.kind != "gumbel":  # compiles the search cut short by the clock
            self.new_game()
            self._searched(state, jax.random.key(2), stop_at=2)
        self.new_game()


class _WithRolloutPolicy:
    """A model whose ``variables`` also carry a rollout policy's weights:
    ``(network variables, weights)``, as ``_search_functions(fast_rollouts=True)`` reads them."""

    def __init__(self, model: Any, weights: Any) -> None:
        self._model = model
        self.variables = (model.variables, weights)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def _search_functions(
    model: Any,
    symmetry: int | str,
    rollout_lambda: float = 0.0,
    rollouts=1,
    *,
    fast_rollouts: bool = False,
    optimism: tuple[float, float] = (0.0, 0.0),
):
    """Jitted ``search(variables, states, key, config, tree, avoid, cache=None)`` (the network
    cache donated), root-and-children evaluation ``(variables, state, actions [K], key) ->
    outputs [1 + K, ...]``, ``reuse_subtree`` and ``new_cache(variables, states, size_log2)``
    (an empty network cache for the search's leaf evaluator; None with rollouts).
    ``rollout_lambda`` > 0 mixes random rollouts into the leaf values (AlphaGo); with
    ``fast_rollouts`` the ``variables`` are ``(network variables, rollout policy weights)``
    (:class:`_WithRolloutPolicy`) and that policy plays the rollouts. ``optimism``:
    ``(root, below)`` policy optimism; the root-and-children evaluation uses the root's."""
    from gojax.evaluate import evaluate
    from gojax.search import katago_evaluator, new_cache, reuse_subtree, search
    from gojax.uct import mixed_evaluator

    version = model.output_spec
    net, root_net = optimism_modules(model, optimism)

    def leaf_evaluator(module, variables, weights=None):
        # Every node's ownership, for the tree's mean at the root (one game: cheap).
        evaluator = katago_evaluator(
            (module, variables, version), symmetry=symmetry, ownership=True
        )
        if rollout_lambda:
            evaluator = mixed_evaluator(evaluator, rollout_lambda, rollouts, weights=weights)
        return evaluator

    @functools.partial(jax.jit, static_argnames=("config", "resume"), donate_argnames=("cache",))
    def run_search(
        variables, states, key, config, tree, avoid, stop_at=None, resume=False, cache=None
    ):
        variables, weights = variables if fast_rollouts else (variables, None)
        root_evaluator = None if root_net is None else leaf_evaluator(root_net, variables, weights)
        return search(
            leaf_evaluator(net, variables, weights),
            states,
            key,
            config,
            tree,
            avoid,
            root_evaluator=root_evaluator,
            stop_at=stop_at,
            resume=resume,
            cache=cache,
        )

    @functools.partial(jax.jit, static_argnames=("size_log2",))
    def make_cache(variables, states, size_log2):
        variables = variables[0] if fast_rollouts else variables
        return new_cache(leaf_evaluator(net, variables), states, jax.random.key(0), size_log2)

    @jax.jit
    def run_evaluate(variables, state, actions, key):
        if fast_rollouts:
            variables = variables[0]
        children = jax.vmap(play, in_axes=(None, 0))(state, actions)
        states = jax.tree.map(lambda r, c: jnp.concatenate([r[None], c]), state, children)
        return evaluate(
            root_net or net, variables, states, version=version, symmetry=symmetry, key=key
        )

    cache_maker = None if rollout_lambda else make_cache
    return run_search, run_evaluate, jax.jit(reuse_subtree), cache_maker
