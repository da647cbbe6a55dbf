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
argmax, and PUCT's random tie-break drawn below the root only at the levels where it
can change a choice: the same choices), mctx's ``backward`` arithmetic (batched so that
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

This module sets a search up and reads its result; the parts live beside it:
``gojax._search_config`` (:class:`SearchConfig` and KataGo's ranges),
``gojax._search_evaluators`` (the evaluators), ``gojax._search_simulation`` (the
simulation loop: step, descent, expansion, backup), ``gojax._search_tree`` (whole-tree
operations: fresh, padded, re-rooted and re-scored trees, the tree's statistics) and
``gojax._search_root`` (root noise and temperature, the move chosen). Import them all
from here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import flax
import jax
import jax.numpy as jnp
import mctx
from mctx._src.seq_halving import score_considered as _score_considered

from gojax import _root_symmetry, _selection, _utility
from gojax._board import WHITE, GoState
from gojax._nn_cache import NNCache, cache_stats, cached_evaluate, new_cache
from gojax._root_symmetry import symmetric_moves, transform_actions, transform_point_values
from gojax._search_config import GREEDY_TEMPERATURE, SearchConfig, default_dirichlet_alpha
from gojax._search_config import KATAGO_PUCT_RANGES as KATAGO_PUCT_RANGES
from gojax._search_config import KINDS as KINDS
from gojax._search_config import MOVE_SETS as MOVE_SETS
from gojax._search_config import MOVE_TEMPERATURE_RANGE as MOVE_TEMPERATURE_RANGE
from gojax._search_config import ROOT_TEMPERATURE_RANGE as ROOT_TEMPERATURE_RANGE
from gojax._search_config import TEMPERATURE_HALFLIFE_RANGE as TEMPERATURE_HALFLIFE_RANGE
from gojax._search_evaluators import (
    Evaluator,
    _mask_logits,
    _num_outputs,
    agz_evaluator,
    evaluate_with_score,
    katago_evaluator,
    policy_logits,
    uniform_evaluator,
)
from gojax._search_root import LCB_STDEVS as LCB_STDEVS
from gojax._search_root import (
    _dirichlet_logits,
    _greedy,
    _lcb_choice,
    _tempered_logits,
    lower_confidence_bounds,
)
from gojax._search_simulation import ScoreUtility as ScoreUtility
from gojax._search_simulation import _backward as _backward
from gojax._search_simulation import (
    _Rules,
    _run_batched_simulations,
    _run_simulations,
    _ucb1_selection,
    _where,
    make_recurrent_fn,
)
from gojax._search_tree import (
    NODE_FIELDS,
    SearchData,
    _new_tree,
    _pad_tree,
    _rescored,
    _same_position,
    reuse_subtree,
    root_score_means,
    show_roots,
    tree_ownership,
    tree_ownership_stdev,
)
from gojax._tree_reuse import (
    ILLEGAL_LOGIT,
    RootStats,
    Tree,
    principal_variation,
    root_stats,
    subtree_ownership,
    subtree_score_distributions,
)
from gojax._tree_reuse import ILLEGAL_THRESHOLD as ILLEGAL_THRESHOLD

__all__ = [
    "NODE_FIELDS",
    "Evaluator",
    "NNCache",
    "RootStats",
    "SearchConfig",
    "SearchOutput",
    "agz_evaluator",
    "cache_stats",
    "default_dirichlet_alpha",
    "katago_evaluator",
    "lower_confidence_bounds",
    "make_recurrent_fn",
    "new_cache",
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
    cache: NNCache | None = None  # the network cache given to the search, with the
    #   evaluations it made stored (gojax._nn_cache); None when none was given


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
    cache: NNCache | None = None,
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
      cache: optional network cache of ``evaluator``'s evaluations (:func:`new_cache`),
        as the previous search gave it back (``SearchOutput.cache``): positions found
        in it are not evaluated again (``gojax._nn_cache``). ``root_evaluator``'s
        evaluations do not go through it.

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

    def fresh_tree(size_nodes: int, cache: NNCache | None) -> tuple[Tree, jax.Array, Any]:
        """A tree holding the evaluated roots, the roots' centres (KataGo takes the
        net's ``scoreMean`` when it has no tree) and the network cache after it."""
        if root_eval is None:
            root_outputs, cache = cached_evaluate(evaluator, cache, states, key_root)
        else:
            root_outputs = root_eval
        logits, value, score, mean, stdev, ownership = root_outputs
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
        return new, center, cache

    if resume:
        center = tree.extra_data.center  # the centre the search began with
    elif tree is None:
        tree, center, cache = fresh_tree(capacity, cache)
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
            fresh, _, refreshed = fresh_tree(nodes, cache)
            return _where(keep, tree, fresh), refreshed

        # The root evaluation is skipped when every game keeps its tree (one game in GTP).
        tree, cache = jax.lax.cond(jnp.all(keep), lambda: (tree, cache), refresh)
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
        scores = functools.partial(
            _selection.puct_scores,
            pb_c_init=config.pb_c_init,
            pb_c_base=config.pb_c_base,
            normalised=config.normalise_values,
        )
        rules = _Rules(root_rule, rule, scores)
    elif config.kind == "katago":
        rule = functools.partial(_selection.katago_puct, **config.katago_puct_constants)
        root_rule = functools.partial(rule, depth=0, wide_root_noise=config.wide_root_noise)
        scores = functools.partial(_selection.katago_scores, **config.katago_puct_constants)
        rules = _Rules(root_rule, rule, scores)
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
        tree, simulations, cache = _run_batched_simulations(
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
            cache=cache,
        )
    else:
        tree, simulations, cache = _run_simulations(
            tree, key_search, evaluator, rules, target, max_depth, moves, utility, cache
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
                config.lcb_stdevs,
                config.lcb_stdev_floor,
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
        cache=cache,
    )
