"""Batched tree search over Go positions with DeepMind's ``mctx``.

The search is network-agnostic: it calls an *evaluator*

    evaluator(states: GoState [B], key) -> (prior_logits [B, A], value [B])
                                         or (prior_logits, value, score [B])
                  or (prior_logits, value, score, score_mean [B], score_stdev [B])

with ``A = P + 1`` actions (pass last), ``value`` in [-1, 1] and ``score``
(the expected final margin in points, for nets with a score head: what the
search reports) for the player to move; ``score_mean`` and ``score_stdev``
are the net's distribution of that margin (KataGo's ``scoreMean`` and its
deviation), from which ``kind="katago"`` takes KataGo's score utility.
:func:`katago_evaluator`, :func:`agz_evaluator` and :func:`uniform_evaluator`
build one; ``gojax.uct`` adds random rollouts and
AlphaGo's mixed value. An evaluator closing over network variables is built
inside the jitted function that uses it, so that the variables are traced
rather than baked into the program::

    @functools.partial(jax.jit, static_argnames="config")
    def act(variables, states, key, config):
        return search(agz_evaluator(net, variables), states, key, config)

Kinds (``SearchConfig.kind``):

* ``"puct"``: AlphaGo Zero's PUCT with Dirichlet noise at the root, the
  selection rule of ``mctx.muzero_policy`` (``mctx.muzero_action_selection``
  with ``qtransform_by_parent_and_siblings``, as ``gojax._selection.puct``);
* ``"gumbel"``: Gumbel MuZero (``mctx.gumbel_muzero_policy``): sequential
  halving with Gumbel noise at the root, the deterministic improved-policy
  rule below it;
* ``"katago"``: KataGo's PUCT (``gojax._selection.katago_puct``) on KataGo's
  utility (the value plus a score term, ``gojax._utility``, when the
  evaluator gives a score distribution): first-play urgency reduction, an
  exploration constant that grows with visits and with the spread of the
  node's utilities; root noise as ``"puct"``;
* ``"uct"``: UCB1, the classical rule (no prior), for rollout-based MCTS.

Why our own simulation loop: mctx's ``search`` always builds a fresh tree,
and tree reuse needs to continue from an existing one; it also expands (and
evaluates) children below finished games. The loop here is mctx's
``search`` -- same key splitting, same node numbering, mctx's action
selection arithmetic and q-transforms (``gojax._selection``, with a faster
argmax), mctx's ``backward`` arithmetic (batched so that
it does not carry the whole tree through its loop) -- with three changes:
it starts from any tree, a game's simulations stop once its root has
``num_simulations + 1`` visits (so a reused subtree saves evaluations), and a
simulation that reaches a finished game backs its result up again instead of
expanding below it. On a fresh tree whose simulations reach no finished game
it builds exactly the tree ``mctx.muzero_policy`` / ``gumbel_muzero_policy``
build (tested).

``SearchConfig.leaf_batch = K > 1`` runs the loop in steps of ``K`` descents per
tree under virtual loss, all the step's new leaves evaluated in one evaluator call
of ``B * K`` positions (entries shown as finished games are not needed), then backed
up one by one (``gojax._virtual_loss``, which explains the virtual loss, the leaves
two descents share and Gumbel's batched sequential halving). ``K = 1`` is the loop
above.

Besides mctx's mean value, every node keeps the mean score, the mean score
utility and the mean squared utility of its visits
(``gojax._tree_reuse.Tree``): what an analysis reports per move (KataGo's
``scoreLead`` is the search's mean, not one evaluation), what KataGo's
selection weighs, and the spread behind a lower confidence bound.

Signs: every value is from the point of view of the player to move at its
node. An edge carries ``reward`` (for the player who moved) and ``discount``:
-1 between plies (mctx's two-player convention), 0 into a finished game,
whose node has value 0 and whose result is the reward: +1 / -1 / 0 for the
mover by the rules' score (two passes, or the move cap).

Illegal moves are masked at every depth. mctx masks only the root, so here:
(1) every node's prior logits are set to the float32 minimum on illegal moves
(the position's own ``legal_moves``, whatever the evaluator returned), which
PUCT and Gumbel never prefer to a legal move with positive prior; and (2) as a
backstop, choosing an illegal move below the root is a lost game for the
player who chose it (reward -1, a finished node that is never expanded): the
position is not played, and the choice can never look better than any legal
move. Tests walk whole trees and find no illegal edge.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import flax
import jax
import jax.numpy as jnp
import mctx
import numpy as np
from mctx._src.seq_halving import score_considered as _score_considered

from gojax import _root_symmetry, _selection, _tree_reuse, _utility, _virtual_loss
from gojax._board import WHITE, GoState, legal_moves, play
from gojax._board import score as final_score
from gojax._features import agz_planes
from gojax._moves import sensible_moves
from gojax._root_symmetry import symmetric_moves, transform_actions, transform_point_values
from gojax._tree_reuse import (
    ILLEGAL_LOGIT,
    ILLEGAL_THRESHOLD,
    RootStats,
    Tree,
    principal_variation,
    root_stats,
    subtree_ownership,
    subtree_score_distributions,
)
from gojax.evaluate import check_symmetry, evaluate, has_score_head

__all__ = [
    "Evaluator",
    "RootStats",
    "SearchConfig",
    "SearchOutput",
    "agz_evaluator",
    "default_dirichlet_alpha",
    "katago_evaluator",
    "lower_confidence_bounds",
    "make_recurrent_fn",
    "policy_logits",
    "principal_variation",
    "reuse_subtree",
    "root_score_means",
    "root_stats",
    "search",
    "show_roots",
    "subtree_ownership",
    "subtree_score_distributions",
    "symmetric_moves",
    "transform_actions",
    "transform_point_values",
    "tree_ownership",
    "tree_ownership_stdev",
    "uniform_evaluator",
]

# ``(states, key) -> (prior_logits, value)``, ``(prior_logits, value, score)``,
# ``(prior_logits, value, score, score_mean, score_stdev)`` or that and ``ownership``
# (``[B, P]``, Black's view; see ``katago_evaluator``).
Evaluator = Callable[[GoState, jax.Array], tuple[jax.Array, ...]]
KINDS = ("puct", "gumbel", "uct", "katago")
# SearchConfig.moves: the move set a search considers at each node.
MOVE_SETS = {"legal": legal_moves, "sensible": sensible_moves}

# The ranges KataGo's config accepts for the constants of its PUCT (cpp/program/setup.cpp).
KATAGO_PUCT_RANGES = {
    "cpuct_exploration": (0.0, 10.0),
    "cpuct_exploration_log": (0.0, 10.0),
    "cpuct_exploration_base": (10.0, 100000.0),
    "cpuct_utility_stdev_scale": (0.0, 1.0),
    "fpu_reduction": (0.0, 2.0),
    "root_fpu_reduction": (0.0, 2.0),
    "wide_root_noise": (0.0, 5.0),
}
# KataGo's ranges of rootPolicyTemperature(Early), chosenMoveTemperature(Early) and
# chosenMoveTemperatureHalflife.
ROOT_TEMPERATURE_RANGE = (0.01, 100.0)
MOVE_TEMPERATURE_RANGE = (0.0, 5.0)
TEMPERATURE_HALFLIFE_RANGE = (0.1, 100000.0)
# A move temperature at or below this plays the best move (KataGo's cut-off).
GREEDY_TEMPERATURE = 1e-4

# Legal logits are kept within this distance of the best one, so that a
# legal move whose probability underflowed (log 0 = -inf) stays distinguishable
# from an illegal one; exp(-1e4) is 0 in float32 anyway.
_LEGAL_LOGIT_FLOOR = -1e4


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Static search settings (hashable: pass as a static argument of ``jax.jit``).

    Attributes:
      kind: ``"puct"`` (AlphaGo Zero), ``"gumbel"`` (Gumbel MuZero),
        ``"katago"`` (KataGo's PUCT) or ``"uct"`` (UCB1, for rollouts; see
        ``gojax.uct``).
      num_simulations: simulations per search; with a reused tree, the
        search stops when the root has ``num_simulations + 1`` visits.
      pb_c_init, pb_c_base: PUCT's ``c(s) = c_init + log((N + c_base + 1) /
        c_base)`` (mctx's and MuZero's 1.25 and 19652).
      dirichlet_alpha: root noise concentration; None gives
        :func:`default_dirichlet_alpha` of the board size
        (``0.03 * 361 / size**2``, AlphaGo Zero's 0.03 at 19x19).
      dirichlet_fraction: weight of the noise in the root prior (AlphaGo
        Zero's 0.25); 0 disables it. PUCT and KataGo only.
      max_num_considered_actions: root actions sampled by Gumbel (16).
      gumbel_scale: scale of the Gumbel noise (1; 0 for a deterministic
        search).
      temperature_moves: for games with ``move_number`` below this, the move
        is sampled (PUCT and UCT: proportionally to visits, tau = 1;
        Gumbel: the sequential-halving winner with its Gumbel noise); from
        then on it is the most visited move (ties: higher Q) or, for Gumbel,
        the winner without noise. AlphaGo Zero's 30 by default, for
        self-play; use 0 to play strongest. Unused with ``move_temperature``.
      move_temperature, move_temperature_early: KataGo's
        ``chosenMoveTemperature`` / ``chosenMoveTemperatureEarly``, in [0, 5],
        instead of ``temperature_moves`` (not Gumbel): every move is sampled
        proportionally to ``visits ** (1 / T)`` (of ``action_weights``, the
        visits after forced-playout pruning), ``T`` going from the early value
        at move 0 to the late one as the root policy temperature does; ``T``
        at most ``GREEDY_TEMPERATURE`` plays the move played without
        temperature (the most visited, or by LCB). None: AlphaGo Zero's
        cut-off; early None is the late one. KataGo's self-play: 0.75 early,
        0.15 late; its GTP engine: 0.5 and 0.1. KataGo's chosenMovePrune and
        chosenMoveSubtract are not modelled (at their defaults, 1 and 0, they
        change nothing a visit count shows).
      max_depth: optional cap on the number of edges of a simulation's path.
      uct_c: UCB1 exploration constant for ``kind="uct"``, on Q in [-1, 1]
        (``Q + c * sqrt(ln n / n_a)``; UCB1's bound for this range is
        ``2 * sqrt(2)``, Go programs used far less).
      moves: the moves the search considers at every node: ``"legal"`` (all
        the rules allow) or ``"sensible"`` (``gojax._moves.sensible_moves``:
        no filling of one's own single-point eyes, pass only after the
        opponent's pass or when nothing else is left) -- what keeps small
        self-play runs from settling into early passes.
      lcb_selection: KataGo's ``useLcbForSelection``, any kind but Gumbel: the move played
        without temperature is, among the root moves with at least
        ``lcb_min_visit_fraction`` of the most visited one's visits, the one
        with the highest lower confidence bound on its value
        (:func:`lower_confidence_bounds`), rather than the most visited. KataGo
        plays so (minimum fraction 0.15 in its GTP defaults); off by default.
      lcb_min_visit_fraction: see ``lcb_selection``.
      static_score_utility, dynamic_score_utility: ``kind="katago"`` only:
        the weights of KataGo's score utility (``gojax._utility``; KataGo's
        0.1 and 0.3), added to the value of every playout whose evaluator
        gives a score distribution. 0 and 0 search on the value alone.
      forced_playouts: KataGo's forced playouts and policy target pruning
        (Wu 2019), PUCT only: ``k`` in ``n_forced = sqrt(k * P * sum N)``, 2
        in KataGo's self-play; 0 (the default) turns both off. At the root,
        a child visited fewer than ``n_forced`` times (but at least once) is
        visited before any other; the policy target (``action_weights``)
        and the sampled move then take back the visits PUCT would not have
        given (``_selection.pruned_visits``). ``visit_counts`` keeps the
        visits as searched. For self-play: evaluation and play leave it at
        0, as KataGo does.
      normalise_values: ``kind="puct"`` only: True (the default), mctx's Q
        normalised to [0, 1] by the parent's and siblings' values; False,
        AlphaGo Zero's raw mean values in [-1, 1], 0 for an unvisited child
        (``gojax._selection.puct_values``).
      cpuct_exploration, cpuct_exploration_log, cpuct_exploration_base,
      cpuct_utility_stdev_scale, fpu_reduction, root_fpu_reduction:
        ``kind="katago"`` only: the constants of KataGo's PUCT
        (``gojax._selection.katago_puct``), named after KataGo's parameters
        (``cpuctExploration`` ... ``rootFpuReductionMax``) and defaulting to its
        GTP engine's: 1, 0.45, 500, 0.85, 0.2, and for the root None = 0.1, or 0
        under root noise. ``cpuct_utility_stdev_scale`` 0 explores as if every
        position were equally uncertain; ``fpu_reduction`` 0 gives an unvisited
        move its parent's utility. Other kinds refuse values but the defaults.
      wide_root_noise: ``kind="katago"`` only: KataGo's ``wideRootNoise`` (0,
        in [0, 5]): at every root selection each move's prior is flattened to
        ``P ** (1 / (4 w + 1))`` in the exploration term and, on a coin flip,
        ``w * |N(0, 1)|`` is added to its utility for the mover, so the search
        spreads over more moves than it would play; KataGo's analysis engine
        and GTP analysis search with 0.04, its moves with 0. Only the search's
        course: the move chosen still comes from the visits.
      root_policy_temperature, root_policy_temperature_early: PUCT and KataGo's
        PUCT: KataGo's ``rootPolicyTemperature`` / ``rootPolicyTemperatureEarly``,
        in [0.01, 100]: the root's prior is raised to ``1 / T`` and renormalised
        before root noise (above 1 widens the search), ``T`` going from the
        early value at move 0 to the late one, halving the gap every
        ``temperature_halflife * size / 19`` moves (:meth:`root_temperature`);
        early None is the late one. 1 (the default) changes nothing. Only the
        root's prior: every search tempers the evaluator's prior afresh
        (``SearchData.root_prior``), a kept tree is never tempered twice.
        KataGo's self-play uses 1.25 early and 1.1 late.
      root_symmetry_pruning: KataGo's ``rootSymmetryPruning``, any kind: at a
        root that a board symmetry leaves unchanged (an empty board; stones that
        mirror each other), only the first move of each set of equivalent moves
        is searched (``gojax._root_symmetry``; KataGo's order puts Black's first
        move in the upper right), the others are kept out of the root but keep
        their share of the prior, as KataGo's; ``SearchOutput.root_symmetries``
        says which symmetries held, for an analysis to report every move of the
        set. A kept tree whose root holds visits on moves so kept out starts
        afresh (one searched so is continued). KataGo's GTP and
        analysis engines prune so; its self-play does not (off by default).
      temperature_halflife: KataGo's ``chosenMoveTemperatureHalflife`` (19):
        the moves on 19x19 (``size * halflife / 19`` on smaller boards) over
        which the early root policy and move temperatures halve their distance
        to the late ones.
      leaf_batch: ``K``, the descents per tree and step (``gojax._virtual_loss``):
        each step descends every game's tree ``K`` times under virtual loss and
        evaluates the new leaves of all ``B`` games in one evaluator call of
        ``B * K`` positions, so ``num_simulations`` takes ``ceil(S / K)`` steps
        (the last one shorter: the root gets exactly its simulations; a descent
        reaching a leaf an earlier one of its step is already expanding is dropped,
        as KataGo drops it, and made up by a later step). 1 (the default): one
        descent per step, the search as it always was. Larger ``K`` evaluates
        more positions per second and searches a little more widely. Any kind;
        for Gumbel the root's sequential halving runs the schedule's next ``K``
        simulations at once (``gojax._virtual_loss``). Capped at
        ``num_simulations``. A search stopped (``stop_at``) and resumed makes the
        same number of simulations, not always the same tree, as one run at once.
      virtual_loss: ``n_vl``, KataGo's ``numVirtualLossesPerThread`` (whole
        visits; 1 here, 3 in KataGo): with ``leaf_batch > 1``, each pending
        descent counts as ``n_vl`` visits lost by the player who chose each edge
        of its path, for the later descents of its step; removed when the step's
        results are backed up. 0: no virtual loss (descents of a step then
        mostly repeat each other and are dropped). Under ``kind="puct"``, whose
        normalised Q values an unvisited move at its worst sibling's (a loss's),
        the loss weighs through its visits alone: with sharp priors more of a
        step's descents meet at a pending leaf and are dropped (a b6c96 net on
        9x9, K = 16: 73% of the slots used at 1, 80% at 3, against 89% for
        KataGo's PUCT and 100% for Gumbel's halving).
    """

    kind: str = "puct"
    num_simulations: int = 64
    pb_c_init: float = 1.25
    pb_c_base: float = 19652.0
    dirichlet_alpha: float | None = None
    dirichlet_fraction: float = 0.25
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    temperature_moves: int = 30
    max_depth: int | None = None
    uct_c: float = 1.0
    moves: str = "legal"
    forced_playouts: float = 0.0
    normalise_values: bool = True
    lcb_selection: bool = False
    lcb_min_visit_fraction: float = 0.15
    static_score_utility: float = _utility.STATIC_SCORE_UTILITY
    dynamic_score_utility: float = _utility.DYNAMIC_SCORE_UTILITY
    cpuct_exploration: float = _selection.KATAGO_CPUCT
    cpuct_exploration_log: float = _selection.KATAGO_CPUCT_LOG
    cpuct_exploration_base: float = _selection.KATAGO_CPUCT_BASE
    cpuct_utility_stdev_scale: float = _selection.KATAGO_STDEV_SCALE
    fpu_reduction: float = _selection.KATAGO_FPU_REDUCTION
    root_fpu_reduction: float | None = None
    wide_root_noise: float = 0.0
    root_policy_temperature: float = 1.0
    root_policy_temperature_early: float | None = None
    move_temperature: float | None = None
    move_temperature_early: float | None = None
    temperature_halflife: float = 19.0
    root_symmetry_pruning: bool = False
    leaf_batch: int = 1
    virtual_loss: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")
        if self.moves not in MOVE_SETS:
            raise ValueError(f"moves must be one of {tuple(MOVE_SETS)}, not {self.moves!r}")
        if self.num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1, not {self.num_simulations}")
        if not 0.0 <= self.dirichlet_fraction <= 1.0:
            raise ValueError(f"dirichlet_fraction must be in [0, 1], not {self.dirichlet_fraction}")
        if self.dirichlet_alpha is not None and self.dirichlet_alpha <= 0:
            raise ValueError(f"dirichlet_alpha must be positive, not {self.dirichlet_alpha}")
        if self.max_num_considered_actions < 1:
            raise ValueError("max_num_considered_actions must be >= 1")
        if self.max_depth is not None and self.max_depth < 1:
            raise ValueError(f"max_depth must be >= 1, not {self.max_depth}")
        if not self.gumbel_scale >= 0.0:
            raise ValueError(f"gumbel_scale must be >= 0, not {self.gumbel_scale}")
        if not self.forced_playouts >= 0.0:
            raise ValueError(f"forced_playouts must be >= 0, not {self.forced_playouts}")
        if self.lcb_selection and self.kind == "gumbel":
            raise ValueError("lcb_selection does not apply to kind='gumbel' (it picks its move)")
        if not 0.0 <= self.lcb_min_visit_fraction <= 1.0:
            raise ValueError(
                f"lcb_min_visit_fraction must be in [0, 1], not {self.lcb_min_visit_fraction}"
            )
        for name in ("static_score_utility", "dynamic_score_utility"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        if not self.normalise_values and self.kind != "puct":
            raise ValueError(f"normalise_values=False needs kind='puct', not {self.kind!r}")
        if self.forced_playouts and self.kind != "puct":
            raise ValueError(
                f"forced_playouts needs kind='puct' (KataGo's PUCT root), not {self.kind!r}"
            )
        for name, (low, high) in KATAGO_PUCT_RANGES.items():
            value = getattr(self, name)
            if value is None:  # root_fpu_reduction: KataGo's choice by root noise
                continue
            if not low <= value <= high:
                raise ValueError(f"{name} must be in [{low:g}, {high:g}], not {value}")
            if self.kind != "katago" and value != SearchConfig.__dataclass_fields__[name].default:
                raise ValueError(f"{name} needs kind='katago' (KataGo's PUCT), not {self.kind!r}")
        low, high = ROOT_TEMPERATURE_RANGE
        for name in ("root_policy_temperature", "root_policy_temperature_early"):
            value = getattr(self, name)
            if value is None:  # the early temperature: the late one
                continue
            if not low <= value <= high:
                raise ValueError(f"{name} must be in [{low:g}, {high:g}], not {value}")
        if self.tempers_root and self.kind not in ("puct", "katago"):
            raise ValueError(
                f"a root policy temperature needs kind='puct' or 'katago', not {self.kind!r}"
            )
        low, high = MOVE_TEMPERATURE_RANGE
        for name in ("move_temperature", "move_temperature_early"):
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise ValueError(f"{name} must be in [{low:g}, {high:g}], not {value}")
        if self.move_temperature_early is not None and self.move_temperature is None:
            raise ValueError("move_temperature_early needs move_temperature (the late one)")
        if self.move_temperature is not None and self.kind == "gumbel":
            raise ValueError("move_temperature does not apply to kind='gumbel' (it picks its move)")
        low, high = TEMPERATURE_HALFLIFE_RANGE
        if not low <= self.temperature_halflife <= high:
            halflife = self.temperature_halflife
            raise ValueError(f"temperature_halflife must be in [{low:g}, {high:g}], not {halflife}")
        for name, least in (("leaf_batch", 1), ("virtual_loss", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < least:
                raise ValueError(f"{name} must be a whole number >= {least}, not {value!r}")

    @property
    def root_fpu(self) -> float:
        """The first-play urgency reduction at the root: ``root_fpu_reduction``, or
        KataGo's 0.1, 0 under root noise (which already spreads the visits)."""
        if self.root_fpu_reduction is not None:
            return float(self.root_fpu_reduction)
        return 0.0 if self.dirichlet_fraction > 0 else 0.1

    @property
    def katago_puct_constants(self) -> dict[str, float]:
        """The keywords of ``gojax._selection.katago_puct`` this config sets."""
        return dict(
            root_fpu_reduction=self.root_fpu,
            fpu_reduction=self.fpu_reduction,
            stdev_scale=self.cpuct_utility_stdev_scale,
            cpuct=self.cpuct_exploration,
            cpuct_log=self.cpuct_exploration_log,
            cpuct_base=self.cpuct_exploration_base,
        )

    @property
    def tempers_root(self) -> bool:
        """Whether the root's prior is tempered (a temperature other than 1)."""
        early = self.root_policy_temperature_early
        return self.root_policy_temperature != 1.0 or (early is not None and early != 1.0)

    def _early_to_late(
        self, early: float | None, late: float, move_number: jax.Array, size: int
    ) -> jax.Array:
        """``[B]`` KataGo's ``interpolateEarly``: ``late + (early - late) * 0.5 **
        (moves / halflife * 19 / size)`` at ``move_number [B]`` (early None: late)."""
        early = late if early is None else early
        halflives = move_number.astype(jnp.float32) / self.temperature_halflife * 19.0 / size
        return late + (early - late) * jnp.power(0.5, halflives)

    def root_temperature(self, move_number: jax.Array, size: int) -> jax.Array:
        """``[B]`` the root policy temperature at ``move_number [B]`` on a ``size`` board."""
        return self._early_to_late(
            self.root_policy_temperature_early, self.root_policy_temperature, move_number, size
        )

    def chosen_move_temperature(self, move_number: jax.Array, size: int) -> jax.Array:
        """``[B]`` the move temperature at ``move_number [B]`` on a ``size`` board
        (``move_temperature`` set)."""
        return self._early_to_late(
            self.move_temperature_early, self.move_temperature, move_number, size
        )

    def without_root_exploration(self) -> SearchConfig:
        """This search playing for strength, as KataGo's cheap and noiseless searches do:
        no root noise, wide root noise, forced playouts or root policy temperature."""
        return dataclasses.replace(
            self,
            dirichlet_fraction=0.0,
            wide_root_noise=0.0,
            forced_playouts=0.0,
            root_policy_temperature=1.0,
            root_policy_temperature_early=None,
        )

    @property
    def weighs_scores(self) -> bool:
        """Whether the search adds KataGo's score utility (given a score distribution)."""
        return self.kind == "katago" and (
            self.static_score_utility > 0 or self.dynamic_score_utility > 0
        )

    @property
    def allowed(self) -> Callable[[GoState], jax.Array]:
        """``state -> [A]`` bool: the moves this search considers."""
        return MOVE_SETS[self.moves]

    def alpha(self, size: int) -> float:
        """The Dirichlet concentration used on a ``size`` board."""
        if self.dirichlet_alpha is not None:
            return float(self.dirichlet_alpha)
        return default_dirichlet_alpha(size)


def default_dirichlet_alpha(size: int) -> float:
    """``0.03 * 361 / size**2``: AlphaGo Zero's 0.03 scaled to the number of points.

    >>> round(default_dirichlet_alpha(9), 4)
    0.1337
    """
    return 0.03 * 361 / (size * size)


class SearchData(NamedTuple):
    """What a search keeps in its tree's ``extra_data``, ``[B]`` leading: the Gumbel noise
    of the root (mctx's ``GumbelMuZeroExtraData`` field; zeros for other kinds) and the
    score utility's centre in Black's view (0 when the search does not weigh scores), so
    that a resumed search goes on as it began; and the root's prior logits as the
    evaluator gave them, before root noise and temperature (the tree holds the prior
    searched with), so that a later search of the same root noises and tempers the
    evaluator's prior again rather than its own (:func:`reuse_subtree` sets it to the
    new root's prior, a child's, which was never noised)."""

    root_gumbel: jax.Array  # [B, A]
    center: jax.Array  # [B]
    root_prior: jax.Array  # [B, A] masked logits


@flax.struct.dataclass
class SearchOutput:
    """What :func:`search` returns for ``B`` games (``A = P + 1`` actions, pass last)."""

    action: jax.Array  # [B] int32: the move to play (pass if the game is already over)
    action_weights: jax.Array  # [B, A] float32: policy target; PUCT/UCT: root visit
    #   distribution (pruned, with forced_playouts); Gumbel: softmax(prior logits +
    #   completed Q), the improved policy
    visit_counts: jax.Array  # [B, A] int32: visits of the root's children
    q_values: jax.Array  # [B, A] float32: root children's values for the player to move, in
    #   [-1, 1]; 0 where unvisited
    root_value: jax.Array  # [B] float32: the root's search value for the player to move
    root_score: jax.Array  # [B] float32: the root's mean score (points) for the player to
    #   move; 0 if the evaluator gives no score (finished games alone would not make one)
    score_values: jax.Array  # [B, A] float32: root children's mean scores for the player to
    #   move; 0 where unvisited, and with an evaluator without scores
    q_stdev: jax.Array  # [B, A] float32: standard deviation of the values behind q_values
    #   (of the utilities, value plus score utility, when kind="katago" weighs scores)
    utilities: jax.Array  # [B, A] float32: root children's mean utilities for the player to
    #   move (q_values plus KataGo's score utility when the search weighs scores, else
    #   q_values); 0 where unvisited
    root_utility: jax.Array  # [B] float32: the root's mean utility for the player to move
    utility_radius: jax.Array  # [B] float32: the largest utility a visit can bring (1, plus
    #   the score utility's weights when the search weighs scores): the scale of the
    #   prior spread in lower_confidence_bounds
    simulations: jax.Array  # [B] int32: simulations this call ran (fewer after reuse)
    ownership: jax.Array  # [B, P] float32: the mean ownership of the tree's evaluations,
    #   Black's view (tree_ownership); [B, 0] unless the evaluator gives ownership
    ownership_stdev: jax.Array  # [B, P] float32: its standard deviation over those
    #   evaluations (tree_ownership_stdev); [B, 0] likewise
    root_symmetries: jax.Array  # [B, 8] bool: the board symmetries that left the root
    #   unchanged and pruned its equivalent moves (SearchConfig.root_symmetry_pruning);
    #   the identity alone without pruning
    tree: Tree  # [B, N] the tree (mctx's, with mean scores and squared values); embeddings
    #   are the GoStates of the nodes


# ----------------------------------------------------------------------------
# Evaluators.


def _mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """``[B, A]`` logits → legal ones shifted to max 0 and clipped, illegal ones float32 min.

    mctx's own masking uses the float32 minimum too; it keeps softmaxes
    NaN-free when no move is legal (a finished game).
    """
    best = jnp.max(jnp.where(legal, logits, -jnp.inf), axis=-1, keepdims=True)
    best = jnp.where(jnp.isfinite(best), best, 0.0)
    shifted = jnp.clip(logits - best, _LEGAL_LOGIT_FLOOR, 0.0)
    return jnp.where(legal, shifted, ILLEGAL_LOGIT).astype(jnp.float32)


def uniform_evaluator() -> Evaluator:
    """An evaluator with a uniform prior over legal moves and value 0 (no knowledge).

    With it a search learns only from finished games in its tree.
    """

    def evaluate(states: GoState, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        del key
        legal = jax.vmap(legal_moves)(states)
        value = jnp.zeros(states.to_play.shape, jnp.float32)
        return _mask_logits(jnp.zeros(legal.shape, jnp.float32), legal), value

    return evaluate


def policy_logits(policy: jax.Array) -> jax.Array:
    """``[..., A]`` probabilities (0 on illegal moves) -> their logs, illegal moves at
    ``ILLEGAL_LOGIT``: a network's policy as a search's prior logits."""
    policy = jnp.asarray(policy)
    tiny = jnp.finfo(policy.dtype).tiny
    return jnp.where(policy > 0, jnp.log(jnp.maximum(policy, tiny)), ILLEGAL_LOGIT)


def katago_evaluator(
    model: Any,
    *,
    symmetry: int | str = "random",
    dtype: Any = jnp.float32,
    policy_optimism: float = 0.0,
    ownership: bool = False,
) -> Evaluator:
    """An evaluator running a KataGo net (``gojax.evaluate.evaluate``) on the leaves.

    Args:
      model: a loaded ``KataGoModel`` (``gojax.katago_model.load_model``) or
        a tuple ``(net, variables, version)``.
      symmetry: ``"random"``: each leaf under its own random board symmetry
        (drawn from the search's key), as KataGo and AlphaGo Zero do;
        ``"average"``: the mean of all 8; an int 0..7: that one.
      dtype: compute dtype of the net built from a ``KataGoModel``.
      policy_optimism: mix of the optimistic policy into the prior, for a
        ``KataGoModel`` of version >= 12 (``gojax.nn.KataGoNet``; KataGo searches
        with 1.0 below the root and 0.2 at it). A tuple's net carries its own.
      ownership: also give each leaf's ownership (``[B, P]``, Black's view), which
        the search keeps per node for :func:`tree_ownership` (analysis; not worth
        its memory in self-play). Nets without a score head give none.

    Returns an evaluator whose logits are the log of KataGo's masked policy
    (illegal moves at the float32 minimum), whose value is ``win - loss``,
    whose score is the lead (``scoreLead``) and whose score distribution is
    ``scoreMean`` and its deviation, all for the player to move; no score
    from nets without a score head (AlphaGo Zero's, AlphaGo's).
    """
    if isinstance(model, tuple):
        net, variables, version = model
    else:
        net = model.module(dtype=dtype, policy_optimism=policy_optimism)
        variables, version = model.variables, model.output_spec
    symmetry = check_symmetry(symmetry)
    scored = has_score_head(version)

    def evaluate_leaves(states: GoState, key: jax.Array) -> tuple[jax.Array, ...]:
        out = evaluate(
            net,
            variables,
            states,
            version=version,
            symmetry=symmetry,
            key=key if symmetry == "random" else None,
        )
        logits = policy_logits(out["policy"])
        if not scored:
            return logits, out["value"]
        sign = jnp.where(states.to_play == WHITE, 1.0, -1.0)
        mean = out["white_score_selfplay"]
        stdev = jnp.sqrt(jnp.maximum(out["white_score_selfplay_sq"] - mean**2, 0.0))
        scores = (
            logits,
            out["value"],
            (sign * out["white_lead"]).astype(jnp.float32),
            (sign * mean).astype(jnp.float32),
            stdev.astype(jnp.float32),
        )
        if not ownership:
            return scores
        return scores + ((-out["white_ownership"]).astype(jnp.float32),)

    return evaluate_leaves


def agz_evaluator(net: Any, variables: Any) -> Evaluator:
    """An evaluator for a ``gojax.nn.AlphaGoZeroNet`` on AlphaGo Zero's 17 input planes.

    The net's ``policy_logits`` are used as they are (the search masks
    illegal moves) and its tanh ``value`` is already for the player to move.
    """

    def evaluate_leaves(states: GoState, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        del key
        planes = jax.vmap(agz_planes)(states)
        out = net.apply(variables, planes, train=False)
        return out["policy_logits"], out["value"]

    return evaluate_leaves


# ----------------------------------------------------------------------------
# One step below a node: play, score finished games, evaluate.


def _where(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per-game select between two pytrees whose leaves start with the batch axis."""

    def pick(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim)), a, b)

    return jax.tree.map(pick, new, old)


def _num_outputs(evaluator: Evaluator, states: GoState, key: jax.Array) -> int:
    """How many arrays ``evaluator`` returns: 2, 3 (a score), 5 (a score distribution too)
    or 6 (and ownership); found by tracing it, nothing runs."""
    return len(jax.eval_shape(lambda s: evaluator(s, key), states))


def evaluate_with_score(
    evaluator: Evaluator, states: GoState, key: jax.Array
) -> tuple[jax.Array, ...]:
    """``evaluator``'s ``(prior_logits, value, score, score_mean, score_stdev, ownership)``,
    each ``[B]`` but the logits and the ownership (``[B, P]``, Black's view); zeros for the
    scores it does not give, ``[B, 0]`` for an ownership it does not give."""
    out = tuple(evaluator(states, key))
    if len(out) not in (2, 3, 5, 6):
        raise ValueError(f"an evaluator returns 2, 3, 5 or 6 arrays, not {len(out)}")
    zeros = jnp.zeros(out[1].shape, jnp.float32)
    scores = out[:5] + (zeros,) * (5 - len(out[:5]))
    ownership = out[5] if len(out) == 6 else jnp.zeros(out[1].shape + (0,), jnp.float32)
    return scores + (ownership,)


# ``(score_mean [B], score_stdev [B], player [B]) -> [B]``: the score utility for ``player``
# (+1 Black, -1 White) of a score distribution given for that player; see ``search``.
ScoreUtility = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


class _Children(NamedTuple):
    """What :func:`_step` finds below ``[B]`` positions: mctx's output and ``[B]`` children."""

    out: mctx.RecurrentFnOutput
    states: GoState
    score: jax.Array
    score_mean: jax.Array
    score_stdev: jax.Array
    score_utility: jax.Array
    ownership: jax.Array  # [B, P] Black's view, or [B, 0] untracked


def _step(
    evaluator: Evaluator,
    key: jax.Array,
    parents: GoState,
    actions: jax.Array,
    action_legal: jax.Array,
    moves: Callable[[GoState], jax.Array] | None = None,
    utility: ScoreUtility | None = None,
    skip: jax.Array | None = None,
) -> _Children:
    """Children of ``[B]`` positions after ``actions [B]``, with reward, discount, prior, value,
    score, score distribution and score utility ``[B]``.

    ``action_legal [B]`` says whether each action is legal in its parent; an
    illegal one (possible only if priors give it weight) loses for the player
    who chose it and leaves a finished copy of the parent. ``moves`` gives
    the children's move sets, ``[B]`` states to ``[B, A]`` bool (see
    :func:`_search_moves`; default: the legal moves). The score is for the
    player to move at the child, the one who did not choose the action: the
    evaluator's, or in a game that just ended the rules' count (an illegal
    choice loses by the whole board). The score distribution is the
    evaluator's (a finished game's count and :func:`_utility.final_score_stdev`)
    and the score utility ``utility``'s of it, for the same player; 0 without
    ``utility``. ``skip [B]``: children whose evaluation is not wanted (their results
    are dropped): the evaluator is shown them as finished games, which it may leave
    unevaluated (a batched search's dropped descents, ``gojax._virtual_loss``).
    """
    mover = parents.to_play.astype(jnp.float32)
    was_over = parents.terminated
    illegal = ~action_legal & ~was_over
    played = jax.vmap(play)(parents, actions)
    # A per-game select over every field of the state, fused into each reader of the
    # children, cost ~3% of a b1c16 search; illegal actions are rare, so select only then.
    children = jax.lax.cond(
        jnp.any(illegal), lambda: _where(illegal, parents, played), lambda: played
    )
    children = children.replace(terminated=children.terminated | illegal)
    ended = children.terminated & ~was_over & ~illegal
    # Scoring flood-fills the board: skip it in the (frequent) steps where no game ended.
    margin = jax.lax.cond(
        jnp.any(ended),
        lambda: jax.vmap(final_score)(children).astype(jnp.float32) * mover,
        lambda: jnp.zeros(mover.shape, jnp.float32),
    )  # [B]: the mover's margin in an ended game
    reward = jnp.where(illegal, -1.0, jnp.where(ended, jnp.sign(margin), 0.0))
    discount = jnp.where(children.terminated, 0.0, -1.0)
    shown = children if skip is None else children.replace(terminated=children.terminated | skip)
    logits, value, score, score_mean, score_stdev, ownership = evaluate_with_score(
        evaluator, shown, key
    )
    legal = (moves or jax.vmap(legal_moves))(children)  # none in a finished game
    out = mctx.RecurrentFnOutput(
        reward=reward.astype(jnp.float32),
        discount=discount.astype(jnp.float32),
        prior_logits=_mask_logits(logits, legal),
        value=jnp.where(children.terminated, 0.0, value).astype(jnp.float32),
    )
    points = float(parents.board.shape[-1])
    final = jnp.where(illegal, points, jnp.where(ended, -margin, 0.0))
    score = jnp.where(children.terminated, final, score).astype(jnp.float32)
    mean = jnp.where(children.terminated, final, score_mean).astype(jnp.float32)
    stdev = jnp.where(children.terminated, _utility.final_score_stdev(final), score_stdev)
    stdev = stdev.astype(jnp.float32)
    if utility is None:
        return _Children(out, children, score, mean, stdev, jnp.zeros_like(score), ownership)
    # The child's player is the one who did not move (an illegal choice's copy of the
    # parent keeps the chooser to move).
    player = -parents.to_play.astype(jnp.int32)
    score_utility = utility(mean, stdev, player).astype(jnp.float32)
    return _Children(out, children, score, mean, stdev, score_utility, ownership)


def make_recurrent_fn(evaluator: Evaluator) -> mctx.RecurrentFn:
    """An mctx ``recurrent_fn(params, key, action, embedding)`` over ``GoState`` embeddings.

    For use with ``mctx.muzero_policy`` / ``gumbel_muzero_policy`` directly
    (``params`` is ignored). It follows the conventions of :func:`search`
    (legality is recomputed from the parent), but mctx will still expand
    nodes below finished games (reward 0, discount 0, value 0 there).
    """

    def recurrent_fn(params, key, action, embedding):
        del params
        action_legal = jax.vmap(legal_moves)(embedding)[jnp.arange(action.shape[0]), action]
        step = _step(evaluator, key, embedding, action, action_legal)
        return step.out, step.states

    return recurrent_fn


# ----------------------------------------------------------------------------
# The simulation loop (mctx's ``search`` with reuse and finished games).


class _Rules(NamedTuple):
    """Selection rules on one unbatched tree: ``root(key, tree, node)``, ``interior(key, tree,
    node, depth)`` -- mctx's switching pair, kept apart so that the root's rule runs once
    per simulation instead of on every step of the batched descent."""

    root: Callable[..., jax.Array]
    interior: Callable[..., jax.Array]


def _ucb1_selection(key, tree: Tree, node, depth, *, c: float):
    """UCB1 on one (unbatched) tree: an unvisited legal move at random, else max Q + c√(ln n/nₐ)."""
    visits = tree.children_visits[node]
    legal = tree.children_prior_logits[node] > ILLEGAL_THRESHOLD
    legal = legal & ~((tree.root_invalid_actions > 0) & (depth == 0))  # the root's own bans
    noise = jax.random.uniform(key, visits.shape)
    unvisited = legal & (visits == 0)
    q = tree.children_rewards[node] + tree.children_discounts[node] * tree.children_values[node]
    total = jnp.maximum(jnp.sum(visits), 1).astype(jnp.float32)
    bound = q + c * jnp.sqrt(jnp.log(total) / jnp.maximum(visits, 1))
    first = _selection.first_argmax(jnp.where(unvisited, noise, -1.0))
    best = _selection.first_argmax(bound + 1e-6 * noise, ~legal)
    return jnp.where(jnp.any(unvisited), first, best)


def _simulate(keys, tree: Tree, rules: _Rules, max_depth: int, root_pending=None):
    """mctx's ``simulate`` for ``[B]`` trees, also stopping before a finished game.

    Returns ``(node [B], action [B])``: the edge to expand. Its child may
    already exist: a finished game (expanded again, which backs its result
    up once more) or a node at ``max_depth``. The first step (the root's rule)
    is taken before the loop, with the key mctx's loop would give it, so that
    the batched loop evaluates only the interior rule. ``root_pending [B, A]``:
    the descents of a batched step still pending at the root, for Gumbel's root
    rule (``gojax._virtual_loss``); None for every other rule.
    """

    def one(key, tree, pending):
        def root_rule(k):
            if pending is None:
                return rules.root(k, tree, root)
            return rules.root(k, tree, root, pending=pending)

        def step(key, node, depth, select):
            key, select_key = jax.random.split(key)
            action = select(select_key)
            child = tree.children_index[node, action]
            depth = depth + 1
            go_on = (
                (child != Tree.UNVISITED)
                & (depth < max_depth)
                & ~tree.embeddings.terminated[jnp.maximum(child, 0)]
            )
            return key, jnp.asarray(node, jnp.int32), action, child, depth, go_on

        def body(state):
            key, _, _, node, depth, _ = state
            return step(key, node, depth, lambda k: rules.interior(k, tree, node, depth))

        root = Tree.ROOT_INDEX
        depth = jnp.zeros((), tree.children_prior_logits.dtype)
        # The root as a Python int: the root step's reads of the root's rows are then
        # static slices rather than gathers (a b1c16 Gumbel search: 3% faster).
        start = step(key, root, depth, root_rule)
        _, node, action, _, _, _ = jax.lax.while_loop(lambda state: state[-1], body, start)
        return node, action

    return jax.vmap(one)(keys, tree, root_pending)


def _expand(
    tree: Tree, key, evaluator, parent, action, child, active, moves, utility=None, counted=None
) -> Tree:
    """Evaluate the edges ``(parent, action)`` into nodes ``child`` for the ``active`` games.

    ``parent, action, child, active``: ``[B]``, one edge per game, or ``[B, K]``, ``K``
    edges per game (a batched search's step, ``gojax._virtual_loss``: all ``B * K``
    evaluated in one evaluator call, the inactive ones shown as finished games). Edges
    active in one game are distinct. ``counted`` (default ``active``; ``[B, K]``): the
    visits to add at each ``child``, where a repeated edge adds one more visit to its
    node. ``moves`` and ``utility`` are for ``[B]`` states, as the search's.
    """
    single = parent.ndim == 1  # then the plain loop's very operations, bit for bit
    batch, nodes = tree.node_visits.shape
    rows = jnp.arange(batch) if single else jnp.arange(batch)[:, None]
    shape = parent.shape

    def flat(x):  # [B, K, ...] -> [B * K, ...]
        return x if single else x.reshape((-1,) + x.shape[2:])

    def unflat(x):  # [B * K, ...] -> [B, K, ...]
        return x if single else x.reshape(shape + x.shape[1:])

    if not single:  # the search's per-game closures, over the K columns
        moves = moves and _per_column(moves, unflat, flat)
        utility = utility and _per_column(utility, unflat, flat)
    parent_states = jax.tree.map(lambda x: flat(x[rows, parent]), tree.embeddings)
    action_legal = tree.children_prior_logits[rows, parent, action] > ILLEGAL_THRESHOLD
    skip = None if single else flat(~active)
    step = _step(
        evaluator, key, parent_states, flat(action), flat(action_legal), moves, utility, skip
    )
    out, score_utility = step.out, step.score_utility

    def at_node(x, new):  # inactive games write out of range, which is dropped
        return x.at[rows, jnp.where(active, child, nodes)].set(unflat(new), mode="drop")

    def at_edge(x, new):
        if single:
            return x.at[rows, parent, action].set(jnp.where(active, new, x[rows, parent, action]))
        return x.at[rows, jnp.where(active, parent, nodes), action].set(unflat(new), mode="drop")

    # An existing child (finished game, max_depth) is expanded again: one more visit.
    if counted is None:
        visits = at_node(tree.node_visits, flat(tree.node_visits[rows, child] + 1))
    else:
        at = jnp.where(counted, child, nodes)
        visits = tree.node_visits.at[rows, at].add(1, mode="drop")

    return tree.replace(
        children_prior_logits=at_node(tree.children_prior_logits, out.prior_logits),
        raw_values=at_node(tree.raw_values, out.value),
        node_values=at_node(tree.node_values, out.value),
        node_scores=at_node(tree.node_scores, step.score),
        node_score_utilities=at_node(tree.node_score_utilities, score_utility),
        raw_score_utilities=at_node(tree.raw_score_utilities, score_utility),
        raw_score_means=at_node(tree.raw_score_means, step.score_mean),
        raw_score_stdevs=at_node(tree.raw_score_stdevs, step.score_stdev),
        node_utility_squares=at_node(tree.node_utility_squares, (out.value + score_utility) ** 2),
        raw_ownership=at_node(tree.raw_ownership, step.ownership),
        node_visits=visits,
        embeddings=jax.tree.map(at_node, tree.embeddings, step.states),
        parents=at_node(tree.parents, flat(parent)),
        action_from_parent=at_node(tree.action_from_parent, flat(action)),
        children_index=at_edge(tree.children_index, flat(child)),
        children_rewards=at_edge(tree.children_rewards, out.reward),
        children_discounts=at_edge(tree.children_discounts, out.discount),
    )


def _per_column(fn: Callable, unflat: Callable, flat: Callable) -> Callable:
    """``fn`` of ``[B]`` arrays or states (a search's move sets and score utility, closing
    over ``[B]`` per-game data) applied to ``[B * K]`` ones, column by column."""

    def apply(*args):
        columns = jax.tree.map(unflat, args)
        return flat(jax.vmap(fn, in_axes=1, out_axes=1)(*columns))

    return apply


def _backward(tree: Tree, leaf: jax.Array) -> Tree:
    """mctx's ``backward`` for ``[B]`` trees from ``leaf [B]``, with the same arithmetic.

    mctx vmaps a ``while_loop`` that carries the whole tree; vmapped, every
    step then selects between the old and the new copy of every array of the
    tree, GoState embeddings included, for every game. Here one batched loop
    walks up the ``[B]`` paths and carries only the arrays it updates, one
    scatter of ``B`` values per array and step (games already at their root
    write out of range, which is dropped). A leaf at the root (a finished
    search) changes nothing. The leaf's score, score utility and squared
    utility are averaged into every node on the path as its value is (the
    score and its utility negated once per ply: no reward or discount applies
    to them).
    """
    batch, nodes = tree.node_visits.shape
    rows = jnp.arange(batch)

    def mean(x, node, count, sample):  # the running mean at ``node`` after one more sample
        return (x[rows, node] * count + sample) / (count + 1.0)

    def cond(carry):
        return jnp.any(carry[0] != Tree.ROOT_INDEX)

    def body(carry):
        index, leaf_value, leaf_score, leaf_utility, stats, children_values, children_visits = carry
        node_values, node_visits, node_scores, node_score_utilities, node_utility_squares = stats
        going = index != Tree.ROOT_INDEX
        parent = jnp.where(going, tree.parents[rows, index], Tree.ROOT_INDEX)
        action = jnp.where(going, tree.action_from_parent[rows, index], 0)
        count = node_visits[rows, parent]
        reward = tree.children_rewards[rows, parent, action]
        leaf_value = reward + tree.children_discounts[rows, parent, action] * leaf_value
        leaf_score, leaf_utility = -leaf_score, -leaf_utility
        squared = (leaf_value + leaf_utility) ** 2
        child_value = node_values[rows, index]
        target = jnp.where(going, parent, nodes)  # out of range: dropped

        def update(x, new):
            return x.at[rows, target].set(new, mode="drop")

        stats = (
            update(node_values, mean(node_values, parent, count, leaf_value)),
            update(node_visits, count + 1),
            update(node_scores, mean(node_scores, parent, count, leaf_score)),
            update(node_score_utilities, mean(node_score_utilities, parent, count, leaf_utility)),
            update(node_utility_squares, mean(node_utility_squares, parent, count, squared)),
        )
        return (
            jnp.where(going, parent, index),
            leaf_value,
            leaf_score,
            leaf_utility,
            stats,
            children_values.at[rows, target, action].set(child_value, mode="drop"),
            children_visits.at[rows, target, action].set(
                children_visits[rows, parent, action] + 1, mode="drop"
            ),
        )

    leaf = leaf.astype(jnp.int32)
    stats = (
        tree.node_values,
        tree.node_visits,
        tree.node_scores,
        tree.node_score_utilities,
        tree.node_utility_squares,
    )
    carry = (
        leaf,
        tree.node_values[rows, leaf],
        tree.node_scores[rows, leaf],
        tree.node_score_utilities[rows, leaf],
        stats,
        tree.children_values,
        tree.children_visits,
    )
    *_, stats, children_values, children_visits = jax.lax.while_loop(cond, body, carry)
    node_values, node_visits, node_scores, node_score_utilities, node_utility_squares = stats
    return tree.replace(
        node_values=node_values,
        node_visits=node_visits,
        node_scores=node_scores,
        node_score_utilities=node_score_utilities,
        node_utility_squares=node_utility_squares,
        children_values=children_values,
        children_visits=children_visits,
    )


def _node_players(tree: Tree) -> jax.Array:
    """``[B, N]`` int32: +1 (Black) or -1 (White), the player whose view a node's numbers
    take: the root's player to move, below it the one who did not choose the node's move
    (so views alternate ply by ply; an illegal choice's copy of its parent keeps the
    chooser to move but takes the other view). 0 on blank nodes."""
    to_play = tree.embeddings.to_play.astype(jnp.int32)
    parents = tree.parents
    chooser = jnp.take_along_axis(to_play, jnp.maximum(parents, 0), axis=1)
    return jnp.where(parents >= 0, -chooser, to_play)


def _own_visits(tree: Tree) -> jax.Array:
    """``[B, N]`` the visits that ended at each node (its own evaluation: one, or every
    visit of a finished game or a node at the depth limit), the rest went to children."""
    return tree.node_visits - jnp.sum(tree.children_visits, axis=-1)


def root_score_means(tree: Tree) -> jax.Array:
    """``[B]`` the mean ``scoreMean`` of the evaluations below each root, for its player to
    move: KataGo's ``scoreMeanAvg``, which centres its dynamic score utility. Each visit
    counts its own evaluation, negated once per ply below the root."""
    players = _node_players(tree)
    own = _own_visits(tree).astype(jnp.float32)
    total = jnp.sum(own * tree.raw_score_means * players, axis=1) * players[:, Tree.ROOT_INDEX]
    return total / jnp.maximum(tree.node_visits[:, Tree.ROOT_INDEX], 1)


def tree_ownership(tree: Tree) -> jax.Array:
    """``[B, P]`` the mean ownership of the evaluations below each root, Black's view:
    each node's own evaluation weighted by the visits that ended there, as KataGo
    averages ownership over its tree (``getAverageTreeOwnership``) for its analysis.
    ``[B, 0]`` when the search did not track ownership (see :class:`Tree`)."""
    own = _own_visits(tree).astype(jnp.float32)
    total = jnp.einsum("bn,bnp->bp", own, tree.raw_ownership)
    return total / jnp.maximum(tree.node_visits[:, Tree.ROOT_INDEX], 1)[:, None]


def tree_ownership_stdev(tree: Tree) -> jax.Array:
    """``[B, P]`` the standard deviation of the ownership over the same visits as
    :func:`tree_ownership` (KataGo's ``ownershipStdev``); ``[B, 0]`` untracked."""
    own = _own_visits(tree).astype(jnp.float32)
    visits = jnp.maximum(tree.node_visits[:, Tree.ROOT_INDEX], 1)[:, None]
    mean = jnp.einsum("bn,bnp->bp", own, tree.raw_ownership) / visits
    square = jnp.einsum("bn,bnp->bp", own, tree.raw_ownership**2) / visits
    return jnp.sqrt(jnp.maximum(square - mean**2, 0.0))


def _rescored(tree: Tree, utility: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]) -> Tree:
    """``tree`` with every score utility recomputed by ``utility(mean, stdev, player) -> [B, N]``
    from the nodes' stored score distributions, and backed up again: each node's mean
    score utility and squared utility become what :func:`_backward` would have averaged
    had ``utility`` been used from the start. KataGo recomputes its whole tree this way
    when a new search moves the centre of the dynamic score utility.

    A node's sums are its own visits' plus its children's (nodes come after their parents,
    so one pass from the last node to the first adds each finished subtree to its parent):
    score utilities negated once per ply; a finished child, whose value lives in the
    edge's reward, adds ``(reward - its score utility) ** 2`` per visit to the squares.
    """
    batch, nodes = tree.node_visits.shape
    rows = jnp.arange(batch)
    visited = tree.node_visits > 0
    players = _node_players(tree)
    raw = utility(tree.raw_score_means, tree.raw_score_stdevs, players)
    raw = jnp.where(visited, raw, 0.0).astype(jnp.float32)
    own = _own_visits(tree).astype(jnp.float32)
    visits = tree.node_visits.astype(jnp.float32)

    parents = jnp.maximum(tree.parents, 0)
    actions = jnp.maximum(tree.action_from_parent, 0)
    edge_reward = tree.children_rewards[rows[:, None], parents, actions]  # [B, N]
    edge_finished = tree.children_discounts[rows[:, None], parents, actions] == 0.0
    finished_squares = visits * (edge_reward - raw) ** 2  # a finished node has no children
    targets = jnp.where(tree.parents >= 0, tree.parents, nodes)  # out of range: dropped

    # Nodes are numbered from 0 without gaps (mctx's order, kept by re-rooting): the pass
    # covers only the slots some game uses.
    used = jnp.max(jnp.sum(visited, axis=1))

    def add_to_parent(i, sums):
        utilities, squares = sums
        node = used - 1 - i
        up = jnp.where(edge_finished[:, node], finished_squares[:, node], squares[:, node])
        return (
            utilities.at[rows, targets[:, node]].add(-utilities[:, node], mode="drop"),
            squares.at[rows, targets[:, node]].add(up, mode="drop"),
        )

    own_utilities = own * raw
    own_squares = own * (tree.raw_values + raw) ** 2
    utilities, squares = jax.lax.fori_loop(0, used - 1, add_to_parent, (own_utilities, own_squares))
    count = jnp.maximum(visits, 1.0)
    return tree.replace(
        raw_score_utilities=raw,
        node_score_utilities=jnp.where(visited, utilities / count, 0.0),
        node_utility_squares=jnp.where(visited, squares / count, 0.0),
    )


def _run_simulations(
    tree: Tree,
    key,
    evaluator,
    rules: _Rules,
    target_visits: jax.Array | int,
    max_depth: int,
    moves,
    utility: ScoreUtility | None = None,
):
    """Simulate until every root has ``target_visits`` (an int or ``[B]``) visits; returns
    the tree and the simulations run, ``[B]``."""
    batch = tree.node_visits.shape[0]
    rows = jnp.arange(batch)

    target_visits = jnp.broadcast_to(jnp.asarray(target_visits, jnp.int32), (batch,))

    def cond(carry):
        _, tree, _, _ = carry
        return jnp.any(tree.node_visits[:, Tree.ROOT_INDEX] < target_visits)

    def body(carry):
        key, tree, num_nodes, count = carry
        key, simulate_key, expand_key = jax.random.split(key, 3)
        active = tree.node_visits[:, Tree.ROOT_INDEX] < target_visits
        parent, action = _simulate(jax.random.split(simulate_key, batch), tree, rules, max_depth)
        existing = tree.children_index[rows, parent, action]
        is_new = existing == Tree.UNVISITED
        # As in mctx, a node first expanded by a simulation takes the next free index.
        child = jnp.where(is_new, num_nodes, existing)
        child = jnp.where(active, child, Tree.ROOT_INDEX)  # inactive games write nothing
        tree = _expand(tree, expand_key, evaluator, parent, action, child, active, moves, utility)
        tree = _backward(tree, child)
        num_nodes = num_nodes + (is_new & active)
        return key, tree, num_nodes, count + active

    num_nodes = jnp.sum(tree.node_visits > 0, axis=1, dtype=jnp.int32)
    zero = jnp.zeros(batch, jnp.int32)
    _, tree, _, count = jax.lax.while_loop(cond, body, (key, tree, num_nodes, zero))
    return tree, count


def _run_batched_simulations(
    tree: Tree,
    key,
    evaluator,
    rules: _Rules,
    target_visits: jax.Array | int,
    max_depth: int,
    moves,
    utility: ScoreUtility | None = None,
    *,
    leaf_batch: int,
    virtual_loss: int,
    radius: float = 1.0,
    halving: bool = False,
):
    """:func:`_run_simulations` in steps of ``leaf_batch`` descents per game under virtual
    loss (``gojax._virtual_loss.run_simulations``); the same trees at ``leaf_batch = 1``."""

    def descend(keys, tree, root_pending):
        return _simulate(keys, tree, rules, max_depth, root_pending)

    def expand(tree, key, parent, action, child, write, counted=None):
        return _expand(tree, key, evaluator, parent, action, child, write, moves, utility, counted)

    return _virtual_loss.run_simulations(
        tree,
        key,
        descend=descend,
        expand=expand,
        backward=_backward,
        target_visits=target_visits,
        leaf_batch=leaf_batch,
        virtual_loss=virtual_loss,
        radius=radius,
        halving=halving,
    )


def _new_tree(
    states: GoState,
    prior_logits,
    value,
    score,
    score_mean,
    score_stdev,
    score_utility,
    ownership,
    capacity: int,
    legal,
    extra_data: Any,
) -> Tree:
    """A ``[B]`` tree of ``capacity`` nodes holding only its roots (mctx's initial tree)."""
    batch, num_actions = prior_logits.shape
    shape = (batch, capacity)

    def zeros(x):
        return jnp.zeros(shape + x.shape[1:], x.dtype)

    tree = Tree(
        node_visits=jnp.zeros(shape, jnp.int32).at[:, 0].set(1),
        raw_values=jnp.zeros(shape, jnp.float32).at[:, 0].set(value),
        node_values=jnp.zeros(shape, jnp.float32).at[:, 0].set(value),
        node_scores=jnp.zeros(shape, jnp.float32).at[:, 0].set(score),
        node_score_utilities=jnp.zeros(shape, jnp.float32).at[:, 0].set(score_utility),
        raw_score_utilities=jnp.zeros(shape, jnp.float32).at[:, 0].set(score_utility),
        raw_score_means=jnp.zeros(shape, jnp.float32).at[:, 0].set(score_mean),
        raw_score_stdevs=jnp.zeros(shape, jnp.float32).at[:, 0].set(score_stdev),
        node_utility_squares=jnp.zeros(shape, jnp.float32)
        .at[:, 0]
        .set((value + score_utility) ** 2),
        raw_ownership=zeros(ownership).at[:, 0].set(ownership),
        parents=jnp.full(shape, Tree.NO_PARENT, jnp.int32),
        action_from_parent=jnp.full(shape, Tree.NO_PARENT, jnp.int32),
        children_index=jnp.full(shape + (num_actions,), Tree.UNVISITED, jnp.int32),
        children_prior_logits=jnp.zeros(shape + (num_actions,), jnp.float32)
        .at[:, 0]
        .set(prior_logits),
        children_visits=jnp.zeros(shape + (num_actions,), jnp.int32),
        children_rewards=jnp.zeros(shape + (num_actions,), jnp.float32),
        children_discounts=jnp.zeros(shape + (num_actions,), jnp.float32),
        children_values=jnp.zeros(shape + (num_actions,), jnp.float32),
        embeddings=jax.tree.map(lambda x: zeros(x).at[:, 0].set(x), states),
        root_invalid_actions=(~legal).astype(jnp.float32),
        extra_data=extra_data,
    )
    return tree


def _pad_tree(tree: Tree, capacity: int) -> Tree:
    """Grow a tree to ``capacity`` nodes with blank ones (a tree is never shrunk)."""
    extra = capacity - tree.node_visits.shape[1]
    if extra <= 0:
        return tree
    blanks = {
        "parents": Tree.NO_PARENT,
        "action_from_parent": Tree.NO_PARENT,
        "children_index": Tree.UNVISITED,
    }

    def pad(x, fill=0):
        widths = [(0, 0), (0, extra)] + [(0, 0)] * (x.ndim - 2)
        return jnp.pad(x, widths, constant_values=jnp.asarray(fill, x.dtype))

    fields = {
        name: pad(getattr(tree, name), blanks.get(name, 0))
        for name in (
            "node_visits",
            "raw_values",
            "node_values",
            "node_scores",
            "node_score_utilities",
            "raw_score_utilities",
            "raw_score_means",
            "raw_score_stdevs",
            "node_utility_squares",
            "raw_ownership",
            "parents",
            "action_from_parent",
            "children_index",
            "children_prior_logits",
            "children_visits",
            "children_rewards",
            "children_discounts",
            "children_values",
        )
    }
    return tree.replace(**fields, embeddings=jax.tree.map(pad, tree.embeddings))


def _same_position(tree: Tree, states: GoState) -> jax.Array:
    """``[B]`` bool: the tree has a root and it is exactly ``states`` (history included)."""
    roots = jax.tree.map(lambda x: x[:, Tree.ROOT_INDEX], tree.embeddings)
    equal = jax.tree.map(
        lambda a, b: jnp.all((a == b).reshape(a.shape[0], -1), axis=1), roots, states
    )
    same = functools.reduce(jnp.logical_and, jax.tree.leaves(equal))
    return same & (tree.node_visits[:, Tree.ROOT_INDEX] > 0)


def show_roots(tree: Tree, states: GoState, prior_logits: jax.Array) -> Tree:
    """``[B]`` kept trees whose roots are ``states`` shown with another past: each root's
    position set to its state and its prior (``SearchData.root_prior``, which a search of
    a kept root starts from) to ``prior_logits [B, A]``, the root's evaluation as shown
    now; every statistic kept. KataGo's ``ignorePreRootHistory`` shows an analysed root
    with no move before it, so a subtree kept from the analysis of an earlier position
    (its root then a child, shown the move that led there) is re-evaluated at its root
    and searched on. A tree whose root is another position (the stones, the player to
    move, the ko, the rules' record differ) is left as it is: a search of ``states``
    then starts fresh. Jittable."""
    roots = jax.tree.map(lambda x: x[:, Tree.ROOT_INDEX], tree.embeddings)
    # The past the network is shown is all that may differ.
    shown = states.replace(recent_moves=roots.recent_moves, past_boards=roots.past_boards)
    equal = jax.tree.map(
        lambda a, b: jnp.all((a == b).reshape(a.shape[0], -1), axis=1), roots, shown
    )
    same = functools.reduce(jnp.logical_and, jax.tree.leaves(equal))  # [B]
    embeddings = jax.tree.map(
        lambda x, s: x.at[:, Tree.ROOT_INDEX].set(
            jnp.where(same.reshape((-1,) + (1,) * (s.ndim - 1)), s, x[:, Tree.ROOT_INDEX])
        ),
        tree.embeddings,
        states,
    )
    prior = jnp.where(same[:, None], prior_logits, tree.extra_data.root_prior)
    return tree.replace(
        embeddings=embeddings, extra_data=tree.extra_data._replace(root_prior=prior)
    )


def reuse_subtree(tree: Tree, action: jax.Array) -> Tree:
    """``[B]`` search trees -> the subtrees below root action ``action [B]``
    (``gojax._tree_reuse.reuse_subtree``: every statistic kept), whose
    ``SearchData.root_prior`` is the new root's prior: a child's, as the
    evaluator gave it. Jittable."""
    rerooted = _tree_reuse.reuse_subtree(tree, action)
    prior = rerooted.children_prior_logits[:, Tree.ROOT_INDEX]
    return rerooted.replace(extra_data=rerooted.extra_data._replace(root_prior=prior))


def _tempered_logits(logits: jax.Array, legal: jax.Array, temperature: jax.Array) -> jax.Array:
    """``[B, A]`` masked logits with the legal ones divided by ``temperature [B]``: the
    prior raised to ``1 / T`` (normalised by the softmax that reads it), as KataGo
    tempers the root's policy; ``T = 1`` returns ``logits`` bit for bit."""
    return jnp.where(legal, logits / temperature[:, None], logits)


def _dirichlet_logits(key, logits, legal, alpha: float, fraction: float):
    """Root logits with Dirichlet noise mixed into the prior, over the legal moves only.

    Normalised Gamma draws restricted to the legal moves are a Dirichlet on
    them, as KataGo and AlphaGo Zero spread noise; mctx spreads it over all
    actions and then drops the illegal ones' share. The probability → logit
    round trip is mctx's, so that fraction 0 reproduces ``muzero_policy``.
    """
    probs = jax.nn.softmax(logits, axis=-1)
    if fraction > 0:
        gamma = jax.random.gamma(key, alpha, logits.shape) * legal
        noise = gamma / jnp.maximum(jnp.sum(gamma, axis=-1, keepdims=True), 1e-30)
        probs = (1 - fraction) * probs + fraction * noise
    noisy = jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))
    return _mask_logits(noisy, legal)


def _greedy(visits, q, invalid):
    """``[B]`` most visited legal action, ties to the higher Q (visits are integers)."""
    score = visits.astype(jnp.float32) + 0.25 * (jnp.clip(q, -1.0, 1.0) + 1.0)
    return _selection.first_argmax(score, invalid)


# KataGo's ``lcbStdevs``: how many standard errors below the mean a bound lies.
LCB_STDEVS = 5.0


def lower_confidence_bounds(q, visits, q_stdev, stdevs: float = LCB_STDEVS, radius: float = 1.0):
    """Lower confidence bounds of mean values, KataGo's way; any matching shapes.

    ``q - stdevs * sqrt(variance / n)`` over the ``n = visits`` values in
    ``[-radius, radius]`` averaged into ``q``, whose standard deviation is
    ``q_stdev``. As KataGo does (``getSelfUtilityLCBAndRadius``, one weight
    per visit), the variance takes a prior of weight ``1 / n**2`` that it is
    the largest possible (``radius**2``: 1 for values, 1.4 with KataGo's score
    utility), so that one or two equal samples do not claim certainty; it
    fades as ``n`` grows. Unvisited moves get ``q - 2 * stdevs * radius``, KataGo's
    bound without visits. NumPy arrays in, NumPy out; jax arrays in, jax out.
    """
    xp = jnp if isinstance(q, jax.Array) else np
    n = xp.maximum(xp.asarray(visits, q.dtype), 1.0)
    prior = 1.0 / n**2
    variance = q_stdev**2 + radius**2 * prior / (n + prior)
    ess = (n + prior) ** 2 / (n + prior**2)  # effective sample size with the prior
    bound = q - stdevs * xp.sqrt(variance / ess)
    return xp.where(xp.asarray(visits) > 0, bound, q - 2.0 * stdevs * radius)


def _lcb_choice(visits, q, q_stdev, invalid, min_fraction: float, radius: float = 1.0):
    """``[B]`` KataGo's LCB move: the best bound among the moves with at least
    ``min_fraction`` of the most visits (the most visited one is always among them)."""
    most = jnp.max(jnp.where(invalid, 0, visits), axis=-1, keepdims=True)
    eligible = ~invalid & (visits > 0) & (visits >= min_fraction * most)
    bounds = lower_confidence_bounds(q, visits, q_stdev, radius=radius)
    # Ties (equal bounds) to the more visited move.
    score = bounds + 1e-6 * visits.astype(jnp.float32) / jnp.maximum(most, 1)
    choice = _selection.first_argmax(score, ~eligible)
    return jnp.where(jnp.any(eligible, axis=-1), choice, _greedy(visits, q, invalid))


def _search_moves(
    allowed: Callable[[GoState], jax.Array], avoid: jax.Array | None, root_moves: jax.Array
) -> Callable[[GoState], jax.Array]:
    """The move sets of a search's nodes, ``[B]`` states to ``[B, A]`` bool: ``allowed``
    (``SearchConfig.allowed``) less the moves ``avoid [B, 2, A]`` keeps out at the node's
    depth, ``move_number - root_moves [B]`` plies below its root (see :func:`search`)."""
    batched = jax.vmap(allowed)
    if avoid is None:
        return batched

    def moves(states: GoState) -> jax.Array:
        legal = batched(states)
        depth = states.move_number - root_moves  # [B]
        white = (states.to_play == WHITE).astype(jnp.int32)
        until = jnp.take_along_axis(avoid, white[:, None, None], axis=1)[:, 0]  # [B, A]
        kept = legal & (until <= depth[:, None])
        return jnp.where(jnp.any(kept, axis=-1, keepdims=True), kept, legal)

    return moves


def search(
    evaluator: Evaluator,
    states: GoState,
    key: jax.Array,
    config: SearchConfig,
    tree: Tree | None = None,
    avoid: jax.Array | None = None,
    root_evaluator: Evaluator | None = None,
    stop_at: jax.Array | int | None = None,
    resume: bool = False,
) -> SearchOutput:
    """Search ``[B]`` positions; jittable with ``evaluator`` and ``config`` static.

    Args:
      evaluator: ``(states [B], key) -> (prior_logits [B, A], value [B])``.
      states: ``[B]`` stacked ``GoState`` (one board size and rule set).
      key: PRNG key, consumed.
      config: a :class:`SearchConfig`.
      tree: optional ``[B]`` tree to continue from, normally
        ``reuse_subtree(previous.tree, action)``. Games whose tree root is not
        exactly their state (or is empty) start fresh; the others keep their
        statistics, get fresh root noise and temperature (on the root's prior as
        evaluated, ``SearchData.root_prior``), and run only the simulations that
        bring the root to ``num_simulations + 1`` visits. PUCT and UCT only
        (Gumbel's sequential halving assumes a fresh root). A smaller tree is
        padded to ``num_simulations + 1`` nodes; a larger one keeps its size.
      avoid: optional ``[B, 2, A]`` int32, moves kept out of the search (KataGo's
        ``avoidMoves``/``allowMoves``): ``avoid[b, i, a] = d`` keeps move ``a``
        out of game ``b``'s nodes less than ``d`` plies below the root where
        Black (``i = 0``) or White (``i = 1``) is to move; 0 never. A node that
        would be left without a move keeps all of its own. A game with any
        restriction starts fresh: a kept tree was searched without it.
      root_evaluator: optional evaluator of the roots only (static), for settings
        that KataGo applies at the root alone (``rootPolicyOptimism``): a fresh root
        is evaluated by it, and a kept root's prior (evaluated as a child, by
        ``evaluator``) is replaced by its prior, its statistics kept. None: ``evaluator``.
      stop_at: optional root visits (an int, or ``[B]`` int32, traced) at which this
        call stops simulating, at most ``num_simulations + 1`` (the default): a search
        stopped early, to be continued with ``resume``. Every ``stop_at`` runs the
        same compiled program.
      resume: ``tree`` is this same search's (same ``states``, ``config``, ``avoid``
        and evaluators), stopped by ``stop_at``: simulate on from it as it stands, with
        no new root evaluation, root noise or Gumbel noise and the score utility's
        centre it began with (the tree's ``extra_data``, :class:`SearchData`), so that
        a search run in parts is the search run at once (bit for bit with a deterministic
        evaluator: the keys only seed the evaluator and the move sampled at the end).
        Static.

    Returns:
      A :class:`SearchOutput`. Finished games get pass and meaningless weights.
    """
    if tree is not None and config.kind == "gumbel" and not resume:
        raise ValueError("tree reuse needs kind='puct' or 'uct': Gumbel assumes a fresh root")
    if resume and tree is None:
        raise ValueError("resume needs the tree of the search to continue")
    key_root, key_policy = jax.random.split(key)
    batch = states.to_play.shape[0]
    num_actions = states.num_actions
    size = states.size
    moves = _search_moves(config.allowed, avoid, states.move_number)
    legal = moves(states)  # [B, A]
    invalid = ~legal
    capacity = config.num_simulations + 1
    # The root's moves kept out as equivalent to another: out of its selection, but
    # still in its prior, whose softmax the logits masked by ``legal`` alone give.
    if config.root_symmetry_pruning:
        # The position's symmetries, whatever moves ``avoid`` keeps out (KataGo's); an
        # avoided move stands for none of its images.
        allowed = legal if avoid is None else jax.vmap(config.allowed)(states)
        symmetries = jax.vmap(_root_symmetry.root_symmetries)(states, allowed)
        duplicates = jax.vmap(_root_symmetry.duplicate_moves)(states, legal, symmetries)
    else:
        symmetries = jnp.zeros((batch, 8), bool).at[:, 0].set(True)
        duplicates = jnp.zeros_like(legal)
    root_invalid = invalid | duplicates

    # Key use mirrors mctx's policies so that fresh searches match them.
    if config.kind == "gumbel":
        key_search, key_gumbel = jax.random.split(key_policy)
        key_act = key_noise = None
        if resume:  # the noise the search started with
            gumbel = tree.extra_data.root_gumbel
        else:
            gumbel = config.gumbel_scale * jax.random.gumbel(key_gumbel, (batch, num_actions))
    else:
        key_act, key_noise, key_search = jax.random.split(key_policy, 3)
        gumbel = jnp.zeros((batch, num_actions), jnp.float32)
    # The centre and the root's prior are filled in below, once known.
    extra_data = SearchData(
        root_gumbel=gumbel,
        center=jnp.zeros((batch,), jnp.float32),
        root_prior=jnp.zeros((batch, num_actions), jnp.float32),
    )

    # KataGo's score utility, when the search weighs scores and the evaluators give their
    # distribution: ``(mean, stdev, player, center) -> [B]``, all for ``player``'s view but
    # ``center``, the dynamic term's centre in Black's view (one per game and search).
    outputs = _num_outputs(evaluator, states, key_root)
    weighs = (
        config.weighs_scores
        and outputs >= 5
        and (root_evaluator is None or _num_outputs(root_evaluator, states, key_root) >= 5)
    )

    def score_utility(mean, stdev, player, center):
        return _utility.score_utility(
            mean,
            stdev,
            center * player,
            size,
            config.static_score_utility,
            config.dynamic_score_utility,
        )

    def centers(expected):  # [B] the root mover's expected score -> centres in Black's view
        return _utility.dynamic_center(expected, size) * states.to_play

    # With a root evaluator every root is evaluated once, here; without one a root is
    # evaluated only if some game starts fresh.
    root_eval = (
        None
        if root_evaluator is None or resume
        else evaluate_with_score(root_evaluator, states, key_root)
    )

    def fresh_tree(size_nodes: int) -> tuple[Tree, jax.Array]:
        """A tree holding the evaluated roots, and the roots' centres (KataGo takes the
        net's ``scoreMean`` when it has no tree)."""
        logits, value, score, mean, stdev, ownership = (
            evaluate_with_score(evaluator, states, key_root) if root_eval is None else root_eval
        )
        prior = _mask_logits(logits, legal)
        center = centers(mean)
        root_utility = (
            score_utility(mean, stdev, states.to_play, center) if weighs else jnp.zeros_like(value)
        )
        new = _new_tree(
            states,
            prior,
            value,
            score,
            mean,
            stdev,
            root_utility,
            ownership,
            size_nodes,
            legal,
            extra_data,
        )
        return new, center

    if resume:
        center = tree.extra_data.center  # the centre the search began with
    elif tree is None:
        tree, center = fresh_tree(capacity)
    else:
        # The kept roots' priors as their evaluator gave them, not as last searched.
        evaluated = tree.extra_data.root_prior
        tree = _pad_tree(tree, capacity).replace(extra_data=extra_data)
        tree = tree.replace(
            children_prior_logits=tree.children_prior_logits.at[:, Tree.ROOT_INDEX].set(evaluated)
        )
        # A kept root searched without the pruning (as a child) may hold visits on the
        # moves now kept out: such a tree starts again.
        pruned_visits = jnp.where(duplicates, tree.children_visits[:, Tree.ROOT_INDEX], 0)
        keep = _same_position(tree, states) & ~jnp.any(pruned_visits > 0, axis=1)
        if avoid is not None:
            keep = keep & ~jnp.any(avoid > 0, axis=(1, 2))
        nodes = tree.node_visits.shape[1]

        def refresh():
            return _where(keep, tree, fresh_tree(nodes)[0])

        # The root evaluation is skipped when every game keeps its tree (one game in GTP).
        tree = jax.lax.cond(jnp.all(keep), lambda: tree, refresh)
        # As KataGo: a kept root centres on the mean scoreMean below it, and every kept
        # node's score utilities are recomputed around that centre (a fresh root's
        # centre and utility come out as ``fresh_tree`` made them).
        if weighs:
            center = centers(root_score_means(tree))
            tree = _rescored(tree, lambda m, s, p: score_utility(m, s, p, center[:, None]))
        if root_eval is not None:  # a kept root was evaluated as a child: take the root's prior
            prior = _mask_logits(root_eval[0], legal)
            tree = tree.replace(
                children_prior_logits=tree.children_prior_logits.at[:, Tree.ROOT_INDEX].set(prior)
            )

    root_logits = _mask_logits(tree.children_prior_logits[:, Tree.ROOT_INDEX], legal)
    evaluated = tree.extra_data.root_prior if resume else root_logits
    if config.kind in ("puct", "katago") and not resume:  # a resumed root has its noise
        if config.tempers_root:  # KataGo tempers the policy first, then adds the noise
            temperature = config.root_temperature(states.move_number, size)
            root_logits = _tempered_logits(root_logits, legal, temperature)
        root_logits = _dirichlet_logits(
            key_noise, root_logits, legal, config.alpha(size), config.dirichlet_fraction
        )
    tree = tree.replace(
        children_prior_logits=tree.children_prior_logits.at[:, Tree.ROOT_INDEX].set(root_logits),
        root_invalid_actions=root_invalid.astype(jnp.float32),
    )
    if not resume:  # the centre this search weighs scores around and the untouched
        # root prior, for its later parts and later searches of the same root
        began = center if weighs else jnp.zeros((batch,), jnp.float32)
        tree = tree.replace(extra_data=extra_data._replace(center=began, root_prior=evaluated))

    if config.kind == "puct":
        rule = functools.partial(
            _selection.puct,
            pb_c_init=config.pb_c_init,
            pb_c_base=config.pb_c_base,
            normalised=config.normalise_values,
        )
        root_rule = functools.partial(rule, depth=0, forced_playouts=config.forced_playouts)
        rules = _Rules(root_rule, rule)
    elif config.kind == "katago":
        rule = functools.partial(_selection.katago_puct, **config.katago_puct_constants)
        root_rule = functools.partial(rule, depth=0, wide_root_noise=config.wide_root_noise)
        rules = _Rules(root_rule, rule)
    elif config.kind == "gumbel":
        rules = _Rules(
            functools.partial(
                _selection.gumbel_root,
                num_simulations=config.num_simulations,
                max_num_considered_actions=config.max_num_considered_actions,
            ),
            _selection.gumbel_interior,
        )
    else:
        rule = functools.partial(_ucb1_selection, c=config.uct_c)
        rules = _Rules(functools.partial(rule, depth=0), rule)

    max_depth = config.max_depth or tree.node_visits.shape[1]
    utility = (
        (lambda mean, stdev, player: score_utility(mean, stdev, player, center)) if weighs else None
    )
    # The largest utility a visit can bring (a virtual loss is worth its negative).
    radius = 1.0 + (config.static_score_utility + config.dynamic_score_utility) * weighs
    target = config.num_simulations + 1
    if stop_at is not None:
        target = jnp.minimum(jnp.asarray(stop_at, jnp.int32), target)
    leaf_batch = min(config.leaf_batch, config.num_simulations)
    if leaf_batch > 1:
        tree, simulations = _run_batched_simulations(
            tree,
            key_search,
            evaluator,
            rules,
            target,
            max_depth,
            moves,
            utility,
            leaf_batch=leaf_batch,
            virtual_loss=int(config.virtual_loss),
            radius=float(radius),
            halving=config.kind == "gumbel",
        )
    else:
        tree, simulations = _run_simulations(
            tree, key_search, evaluator, rules, target, max_depth, moves, utility
        )

    stats = root_stats(tree)
    scored = outputs >= 3
    visits = stats.visits
    explore = states.move_number < config.temperature_moves  # [B]
    greedy = _greedy(visits, stats.q, root_invalid)
    if config.kind == "gumbel":
        # mctx's choice: the best of the most visited by gumbel + logits + completed Q.
        completed_q = jax.vmap(mctx.qtransform_completed_by_mix_value, in_axes=[0, None])(
            tree, Tree.ROOT_INDEX
        )
        considered = jnp.max(visits, axis=-1, keepdims=True)

        def pick(noise):
            score = _score_considered(considered, noise, root_logits, completed_q, visits)
            return _selection.first_argmax(score, root_invalid)

        sampled, greedy = pick(gumbel), pick(jnp.zeros_like(gumbel))
        weights = jax.nn.softmax(
            jnp.where(invalid, ILLEGAL_LOGIT, root_logits + completed_q), axis=-1
        )
    else:
        if config.lcb_selection:
            # On the utility (the value unless the search weighs scores), KataGo's way.
            greedy = _lcb_choice(
                visits,
                stats.utility,
                stats.q_stdev,
                root_invalid,
                config.lcb_min_visit_fraction,
                radius,
            )
        if config.forced_playouts:
            prune = functools.partial(
                _selection.pruned_visits,
                forced_playouts=config.forced_playouts,
                pb_c_init=config.pb_c_init,
                pb_c_base=config.pb_c_base,
                normalised=config.normalise_values,
            )
            kept = jax.vmap(prune, in_axes=[0, None])(tree, Tree.ROOT_INDEX)
        else:
            kept = visits.astype(jnp.float32)
        total = jnp.sum(kept, axis=-1, keepdims=True)
        weights = kept / jnp.maximum(total, 1)
        # mctx's sampling at temperature 1: categorical over log visit frequencies.
        logits = jnp.log(jnp.maximum(weights, jnp.finfo(jnp.float32).tiny))
        if config.move_temperature is not None:
            # KataGo's: visits ** (1 / T), T by the move number; never an unvisited move.
            temperature = config.chosen_move_temperature(states.move_number, size)
            explore = temperature > GREEDY_TEMPERATURE
            inverse = 1.0 / jnp.maximum(temperature, GREEDY_TEMPERATURE)
            logits = jnp.where(weights > 0, logits * inverse[:, None], -jnp.inf)
        sampled = jax.random.categorical(key_act, logits - jnp.max(logits, -1, keepdims=True))
        sampled = sampled.astype(jnp.int32)
    action = jnp.where(explore, sampled, greedy)
    action = jnp.where(states.terminated, num_actions - 1, action).astype(jnp.int32)
    return SearchOutput(
        action=action,
        action_weights=weights,
        visit_counts=visits,
        q_values=stats.q,
        root_value=stats.value,
        root_score=jnp.where(scored, stats.root_score, 0.0),
        score_values=jnp.where(scored, stats.score, 0.0),
        q_stdev=stats.q_stdev,
        utilities=stats.utility,
        root_utility=stats.value + tree.node_score_utilities[:, Tree.ROOT_INDEX],
        utility_radius=jnp.full((batch,), radius, jnp.float32),
        simulations=simulations,
        ownership=tree_ownership(tree),
        ownership_stdev=tree_ownership_stdev(tree),
        root_symmetries=symmetries,
        tree=tree,
    )
