"""The tree-descent rules of :mod:`gojax.search`, on one unbatched mctx ``Tree``.

The same arithmetic as mctx's ``muzero_action_selection``,
``gumbel_muzero_root_action_selection`` and
``gumbel_muzero_interior_action_selection`` (PUCT, sequential halving with
Gumbel at the root, the deterministic improved-policy rule below it), with
one change: the argmax. XLA's CPU backend lowers ``jnp.argmax`` to a
two-output (value, index) reduction that is not vectorised: over ``[256, 82]``
scores it took 41 us against 13 us for a max followed by a min over the
indices that reach it. A search takes one such argmax per simulation at the
root and one per level of every descent. Ties go to the lowest index, as
``jnp.argmax``'s do, so the trees are the same as mctx's.

Also KataGo's forced playouts and policy target pruning, and KataGo's own PUCT
(:func:`katago_puct`), which mctx lacks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx
from mctx._src import seq_halving

from gojax._tree_reuse import ILLEGAL_THRESHOLD

Tree = mctx.Tree


def first_argmax(scores: jax.Array, invalid: jax.Array | None = None) -> jax.Array:
    """``[A]`` scores → int32 index of the largest valid one, the lowest index on a tie.

    Invalid entries (``invalid`` true or nonzero) never win unless all are invalid (then 0,
    as ``mctx``'s ``masked_argmax``). A NaN score is never chosen over a number.
    """
    if invalid is not None:
        scores = jnp.where(invalid, -jnp.inf, scores)
    scores = jnp.where(jnp.isnan(scores), -jnp.inf, scores)
    best = jnp.max(scores, axis=-1, keepdims=True)
    index = jnp.arange(scores.shape[-1], dtype=jnp.int32)
    return jnp.min(jnp.where(scores == best, index, scores.shape[-1] - 1), axis=-1)


def _exploration_scale(tree: Tree, node, pb_c_init: float, pb_c_base: float) -> jax.Array:
    """PUCT's ``sqrt(N) * c(N)`` at ``node``: its exploration term is this times ``P / (n + 1)``."""
    node_visits = tree.node_visits[node]
    pb_c = pb_c_init + jnp.log((node_visits + pb_c_base + 1.0) / pb_c_base)
    return jnp.sqrt(node_visits) * pb_c


def puct_values(tree: Tree, node, normalised: bool) -> jax.Array:
    """``[A]`` the value term of PUCT at ``node``: mctx's (MuZero's) Q normalised to [0, 1]
    by the parent's and the siblings' values (an unvisited child: the parent's), or, not
    ``normalised``, AlphaGo Zero's mean value as it stands, in [-1, 1] for the player to
    move (an unvisited child: 0). Normalised, the best child is worth 1 however small its
    margin, and the exploration term, of the same size as ever, matters far less."""
    if normalised:
        return mctx.qtransform_by_parent_and_siblings(tree, node)
    return jnp.where(tree.children_visits[node] > 0, tree.qvalues(node), 0.0)


def forced_visits(priors: jax.Array, visits: jax.Array, k: float) -> jax.Array:
    """KataGo's forced playouts ``n_forced = sqrt(k * P * sum(N))`` of each root child.

    ``priors [A]`` (the root's noised prior), ``visits [A]`` → ``[A]`` float32.
    """
    total = jnp.sum(visits, axis=-1, keepdims=True).astype(jnp.float32)
    return jnp.sqrt(k * priors * total)


# PUCT's random tie-break (mctx's): this times a uniform draw in [0, 1) on every score.
TIE_BREAK = 1e-7


def tie_break(key, num_actions: int) -> jax.Array:
    """``[A]`` the tie-break a PUCT rule adds to its scores (mctx's draw, bit for bit)."""
    return TIE_BREAK * jax.random.uniform(key, (num_actions,))


def tie_break_matters(scores: jax.Array, invalid: jax.Array) -> jax.Array:
    """Whether adding a :func:`tie_break` to ``scores [A]`` can change
    ``first_argmax(scores, invalid)``: some other valid score within the largest draw of the
    best one, rounding included (float rounding is monotonic, so ``s + draw`` never exceeds
    ``s + TIE_BREAK``). A descent draws the tie-break only when some game needs it: the
    draw of ``A`` uniforms per game and level was two thirds of a PUCT descent's time."""
    valid = (invalid == 0) & ~jnp.isnan(scores)
    masked = jnp.where(valid, scores, -jnp.inf)
    best = jnp.max(masked, axis=-1, keepdims=True)
    # The best one always reaches its own score: a second one that does is a contender.
    contenders = valid & (masked + TIE_BREAK >= best)
    return jnp.sum(contenders, axis=-1) >= 2


def _puct_terms(tree: Tree, node, pb_c_init: float, pb_c_base: float, normalised: bool):
    """``([A] value + exploration, [A] priors, [A] visits)`` of PUCT at ``node``."""
    visits = tree.children_visits[node]
    priors = jax.nn.softmax(tree.children_prior_logits[node])
    scale = _exploration_scale(tree, node, pb_c_init, pb_c_base)
    exploration = scale * priors / (visits + 1)
    return puct_values(tree, node, normalised) + exploration, priors, visits


def puct_scores(
    tree: Tree, node, depth, *, pb_c_init: float, pb_c_base: float, normalised: bool = True
) -> tuple[jax.Array, jax.Array]:
    """``([A] scores, [A] invalid)``: :func:`puct`'s rule before its tie-break (and without
    the root's forced playouts): the move is ``first_argmax(scores + tie_break, invalid)``."""
    scores, _, _ = _puct_terms(tree, node, pb_c_init, pb_c_base, normalised)
    return scores, tree.root_invalid_actions * (depth == 0)


def puct(
    key,
    tree: Tree,
    node,
    depth,
    *,
    pb_c_init: float,
    pb_c_base: float,
    forced_playouts: float = 0.0,
    normalised: bool = True,
) -> jax.Array:
    """AlphaZero / MuZero PUCT (MuZero's Appendix B), Q normalised by parent and siblings
    (not ``normalised``: AlphaGo Zero's raw values, :func:`puct_values`).

    With ``forced_playouts = k > 0`` (a root rule only), KataGo's forced
    playouts (Wu 2019, "Forced Playouts and Policy Target Pruning"): a child
    that has been visited but fewer than ``sqrt(k * P * sum(N))`` times is
    chosen before any other; among several such children, the one PUCT
    prefers.
    """
    scores, priors, visits = _puct_terms(tree, node, pb_c_init, pb_c_base, normalised)
    scores = scores + tie_break(key, tree.num_actions)
    invalid = tree.root_invalid_actions * (depth == 0)
    if forced_playouts:  # static: only the root's rule is built with it
        # An expanded child only: under virtual loss (``gojax._virtual_loss``) a move whose
        # first visit is still pending shows visits, and forcing more descents into it
        # would only make duplicates of that leaf. In a plain tree the two go together.
        expanded = (tree.children_index[node] >= 0) & (visits > 0)
        forced = expanded & (visits < forced_visits(priors, visits, forced_playouts))
        invalid = jnp.where(jnp.any(forced), ~forced, invalid > 0)
    return first_argmax(scores, invalid)


# KataGo's PUCT constants (its GTP engine's defaults, cpp/program/setup.cpp).
KATAGO_CPUCT = 1.0  # cpuctExploration
KATAGO_CPUCT_LOG = 0.45  # cpuctExplorationLog
KATAGO_CPUCT_BASE = 500.0  # cpuctExplorationBase
KATAGO_STDEV_PRIOR = 0.40  # cpuctUtilityStdevPrior
KATAGO_STDEV_PRIOR_WEIGHT = 2.0  # cpuctUtilityStdevPriorWeight
KATAGO_STDEV_SCALE = 0.85  # cpuctUtilityStdevScale
KATAGO_FPU_REDUCTION = 0.2  # fpuReductionMax (the root's is an argument: 0.1, 0 with noise)
KATAGO_FPU_PARENT_POW = 2.0  # fpuParentWeightByVisitedPolicyPow


def katago_puct(key, tree: Tree, node, depth, *, wide_root_noise: float = 0.0, **constants):
    """KataGo's PUCT selection (``Search::selectBestChildToDescend``) on raw utilities.

    ``U + c(N) * sqrt(N + 0.01) * f * P / (1 + n)`` over the children, with

    * ``U`` the child's mean utility for the player to move (its value plus
      its score utility, ``gojax._tree_reuse.Tree``; not normalised as
      mctx's Q is); an unvisited child gets *first-play urgency*
      ``V - r * sqrt(m)``: ``m`` the prior mass of the visited children, ``r``
      ``fpu_reduction`` (0.2; ``root_fpu_reduction`` at the root), ``V`` the node's utility
      pulled toward its own first evaluation's while little of the prior has
      been visited (weight ``min(1, m**2)`` on the mean);
    * ``c(N) = cpuct + cpuct_log * log((N + cpuct_base) / cpuct_base)`` (1, 0.45
      and 500), ``N`` the children's visits;
    * ``f = 1 + stdev_scale * (s / 0.4 - 1)`` (``stdev_scale`` 0.85): ``s`` the
      standard deviation of the utilities seen below the node, shrunk toward 0.4
      with the weight of two visits -- noisy positions explore more, settled
      ones less; 0 turns this off.

    ``constants``: ``root_fpu_reduction`` (required), ``fpu_reduction``, ``stdev_scale``,
    ``cpuct``, ``cpuct_log`` and ``cpuct_base``, as :func:`katago_scores` takes them; the
    defaults are KataGo's GTP engine's (the ``KATAGO_*`` constants).

    ``wide_root_noise = w > 0`` (a root rule only: KataGo's ``wideRootNoise``):
    ``P`` in the exploration term becomes ``P ** (1 / (4 w + 1))`` (flatter, not
    renormalised), and each move's ``U``, visited or not, gains ``w * |g|`` on a
    fair coin, ``g`` standard normal, drawn afresh at every selection: moves
    just behind the best take turns at being tried.

    KataGo also weights playouts by their uncertainty; here each counts once.
    """
    noise_keys = None
    if wide_root_noise:
        key, *noise_keys = jax.random.split(key, 3)
    scores, invalid = katago_scores(
        tree, node, depth, wide_root_noise=wide_root_noise, noise_keys=noise_keys, **constants
    )
    return first_argmax(scores + tie_break(key, tree.num_actions), invalid)


def katago_scores(
    tree: Tree,
    node,
    depth,
    *,
    root_fpu_reduction: float,
    fpu_reduction: float = KATAGO_FPU_REDUCTION,
    stdev_scale: float = KATAGO_STDEV_SCALE,
    cpuct: float = KATAGO_CPUCT,
    cpuct_log: float = KATAGO_CPUCT_LOG,
    cpuct_base: float = KATAGO_CPUCT_BASE,
    wide_root_noise: float = 0.0,
    noise_keys=None,
) -> tuple[jax.Array, jax.Array]:
    """``([A] scores, [A] invalid)``: :func:`katago_puct`'s rule before its tie-break: the
    move is ``first_argmax(scores + tie_break, invalid)``. ``noise_keys``: the two keys of
    the wide root noise, with ``wide_root_noise`` (a root rule only)."""
    visits = tree.children_visits[node]
    priors = jax.nn.softmax(tree.children_prior_logits[node])
    q = tree.children_rewards[node] + tree.children_discounts[node] * tree.children_values[node]
    # A child's score utility is for its own mover: negated for this node's.
    children = tree.children_index[node]
    child_utility = tree.node_score_utilities[jnp.maximum(children, 0)]
    q = q - jnp.where(children >= 0, child_utility, 0.0)
    total = jnp.sum(visits).astype(jnp.float32)
    # The spread of the node's utilities, with KataGo's prior.
    weight = tree.node_visits[node].astype(jnp.float32)
    mean = tree.node_values[node] + tree.node_score_utilities[node]
    mean_sq = jnp.maximum(tree.node_utility_squares[node], mean**2)
    prior_var = KATAGO_STDEV_PRIOR**2
    pooled = ((mean**2 + prior_var) * KATAGO_STDEV_PRIOR_WEIGHT + mean_sq * weight) / (
        KATAGO_STDEV_PRIOR_WEIGHT + weight - 1.0
    )
    stdev = jnp.where(weight <= 1, KATAGO_STDEV_PRIOR, jnp.sqrt(jnp.maximum(pooled - mean**2, 0)))
    factor = 1.0 + stdev_scale * (stdev / KATAGO_STDEV_PRIOR - 1.0)
    c = cpuct + cpuct_log * jnp.log((total + cpuct_base) / cpuct_base)
    scale = c * jnp.sqrt(total + 0.01) * factor
    # First-play urgency.
    visited_mass = jnp.sum(jnp.where(visits > 0, priors, 0.0))
    blend = jnp.minimum(1.0, visited_mass**KATAGO_FPU_PARENT_POW)
    raw = tree.raw_values[node] + tree.raw_score_utilities[node]
    parent = blend * mean + (1.0 - blend) * raw
    reduction = jnp.where(depth == 0, root_fpu_reduction, fpu_reduction)
    fpu = parent - reduction * jnp.sqrt(visited_mass)
    value = jnp.where(visits > 0, q, fpu)
    explore = priors
    if wide_root_noise:  # static: only the root's rule is built with it
        key_coin, key_size = noise_keys
        explore = priors ** (1.0 / (4.0 * wide_root_noise + 1.0))
        coin = jax.random.bernoulli(key_coin, 0.5, (tree.num_actions,))
        size = jnp.abs(jax.random.normal(key_size, (tree.num_actions,)))
        value = value + jnp.where(coin, wide_root_noise * size, 0.0)
    # Unlike mctx's rule, an unvisited illegal move would score its first-play urgency:
    # leave the moves with the illegal logit out at every node.
    illegal = tree.children_prior_logits[node] <= ILLEGAL_THRESHOLD
    invalid = illegal | ((tree.root_invalid_actions > 0) & (depth == 0))
    return value + scale * explore / (visits + 1.0), invalid


def pruned_visits(
    tree: Tree,
    node,
    *,
    forced_playouts: float,
    pb_c_init: float,
    pb_c_base: float,
    normalised: bool = True,
) -> jax.Array:
    """KataGo's policy target pruning (Wu 2019): ``[A]`` float32 root visits less the
    forced playouts PUCT would not have given.

    ``c*``, the most visited child, keeps its visits. From every other child
    ``c`` up to ``n_forced(c)`` visits are taken back, as long as ``c``'s PUCT
    score, computed from the final statistics, stays below ``c*``'s; a child
    so reduced to a single visit or none is dropped. ``k = 0`` takes nothing.
    """
    visits = tree.children_visits[node].astype(jnp.float32)
    priors = jax.nn.softmax(tree.children_prior_logits[node])
    scale = _exploration_scale(tree, node, pb_c_init, pb_c_base)
    value = puct_values(tree, node, normalised)
    best = first_argmax(visits, tree.root_invalid_actions)
    best_score = value[best] + scale * priors[best] / (visits[best] + 1)
    # PUCT(c, n) = value + scale * P / (n + 1) < best_score  <=>  n > scale * P / gap - 1.
    gap = best_score - value
    below_best = jnp.floor(scale * priors / jnp.maximum(gap, 1e-30) - 1.0) + 1.0
    below_best = jnp.where(gap > 0, below_best, visits)
    at_most_forced = jnp.ceil(visits - forced_visits(priors, visits, forced_playouts))
    kept = jnp.clip(jnp.maximum(below_best, at_most_forced), 0.0, visits)
    kept = jnp.where((kept < visits) & (kept <= 1.0), 0.0, kept)
    return kept.at[best].set(visits[best])


def gumbel_root(
    key,
    tree: Tree,
    node,
    *,
    num_simulations: int,
    max_num_considered_actions: int,
    pending: jax.Array | None = None,
) -> jax.Array:
    """Sequential halving with Gumbel (Danihelka et al. 2022): the considered action whose
    ``gumbel + logits + completed Q`` is highest among those with the fewest visits the
    halving schedule allows now.

    ``pending [A]`` (int): descents already sent down each root action in this step of a
    batched search (``gojax._virtual_loss``), whose results are not in yet. They count as
    visits for the schedule -- the next descent takes the schedule's next slot, as if they
    had finished -- but not for the values: the completed Q is the finished visits'.
    """
    del key
    visits = tree.children_visits[node]
    completed_q = mctx.qtransform_completed_by_mix_value(tree, node)
    scheduled = visits if pending is None else visits + pending
    table = jnp.array(
        seq_halving.get_table_of_considered_visits(max_num_considered_actions, num_simulations)
    )
    num_valid = jnp.sum(1 - tree.root_invalid_actions, axis=-1).astype(jnp.int32)
    considered = jnp.minimum(max_num_considered_actions, num_valid)
    considered_visit = table[considered, jnp.sum(scheduled, -1)]
    score = seq_halving.score_considered(
        considered_visit,
        tree.extra_data.root_gumbel,
        tree.children_prior_logits[node],
        completed_q,
        scheduled,
    )
    return first_argmax(score, tree.root_invalid_actions)


def gumbel_interior(key, tree: Tree, node, depth) -> jax.Array:
    """Below the root: the action whose visit share lags ``softmax(logits + completed Q)`` most."""
    del key, depth
    visits = tree.children_visits[node]
    completed_q = mctx.qtransform_completed_by_mix_value(tree, node)
    improved = jax.nn.softmax(tree.children_prior_logits[node] + completed_q)
    return first_argmax(improved - visits / (1 + jnp.sum(visits, axis=-1, keepdims=True)))
