"""The static settings of a :func:`gojax.search.search`: :class:`SearchConfig`, its checks,
and the ranges KataGo's config accepts for the settings named after KataGo's.

Separate from the search itself because it is plain Python (a frozen, hashable
dataclass passed as a static argument of ``jax.jit``) that front ends read and
validate (``eval``'s GTP parameters, ``train``'s run configs) without touching the
search's arrays. Public through ``gojax.search``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from gojax import _search_root, _selection, _utility
from gojax._board import GoState, legal_moves
from gojax._moves import sensible_moves

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
      lcb_stdevs: how many standard errors below its mean utility a move's bound lies
        (KataGo's ``lcbStdevs``, 5).
      lcb_stdev_floor: the least spread of utilities the bounds assume (0: the spread
        the visits showed, KataGo's). A move's first few visits often agree, and their
        spread says it is certain: a floor (0.4, KataGo's ``cpuctUtilityStdevPrior``)
        keeps a bound on few visits wide. A search of ``leaf_batch > 1`` spreads its
        visits under virtual loss, so its most visited move says less than a plain
        search's; its best bound says more (9x9, b6c96, 64 visits, K = 8: regret to a
        1,600-visit search's utilities 0.051 by visits, 0.048 by KataGo's bound, 0.043
        with 3 stdevs and this floor at 0.4, against 0.042 for K = 1 by visits).
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
    lcb_stdevs: float = _search_root.LCB_STDEVS
    lcb_stdev_floor: float = 0.0
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
        for name in ("lcb_stdevs", "lcb_stdev_floor"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
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
