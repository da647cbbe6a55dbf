"""The simulation loop of :func:`gojax.search.search`: mctx's ``search`` with tree reuse
and finished games -- one step below a node (play, score a finished game, evaluate), the
descent by the selection rules, the expansion of new leaves, the backup of their values,
scores and utilities, and the loops that repeat these until every root has its visits
(one descent per step, or ``K`` under virtual loss through ``gojax._virtual_loss``).

Separate from ``gojax.search`` (which sets a search up from its config and reads the
move off its root) and from the selection arithmetic (``gojax._selection``): this is the
part that changes the tree one simulation at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mctx

from gojax import _selection, _utility, _virtual_loss
from gojax._board import GoState, legal_moves, play
from gojax._counting import score as final_score
from gojax._nn_cache import NNCache, cached_evaluate
from gojax._search_evaluators import Evaluator, _mask_logits
from gojax._tree_reuse import ILLEGAL_THRESHOLD, Tree


def _where(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per-game select between two pytrees whose leaves start with the batch axis."""

    def pick(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim)), a, b)

    return jax.tree.map(pick, new, old)


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
    cache: NNCache | None = None  # the network cache after the evaluation, if one is kept


def _step(
    evaluator: Evaluator,
    key: jax.Array,
    parents: GoState,
    actions: jax.Array,
    action_legal: jax.Array,
    moves: Callable[[GoState], jax.Array] | None = None,
    utility: ScoreUtility | None = None,
    skip: jax.Array | None = None,
    cache: NNCache | None = None,
) -> _Children:
    """Children of ``[B]`` positions after ``actions [B]``, with reward, discount, prior, value,
    score, score distribution and score utility ``[B]``.

    ``action_legal [B]`` says whether each action is legal in its parent; an
    illegal one (possible only if priors give it weight) loses for the player
    who chose it and leaves a finished copy of the parent. ``moves`` gives
    the children's move sets, ``[B]`` states to ``[B, A]`` bool (see
    ``gojax.search._search_moves``; default: the legal moves). The score is for the
    player to move at the child, the one who did not choose the action: the
    evaluator's, or in a game that just ended the rules' count (an illegal
    choice loses by the whole board). The score distribution is the
    evaluator's (a finished game's count and :func:`_utility.final_score_stdev`)
    and the score utility ``utility``'s of it, for the same player; 0 without
    ``utility``. ``skip [B]``: children whose evaluation is not wanted (their results
    are dropped): the evaluator is shown them as finished games, which it may leave
    unevaluated (a batched search's dropped descents, ``gojax._virtual_loss``). ``cache``:
    a network cache the evaluations go through (``gojax._nn_cache``), given back updated.
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
    evaluations, cache = cached_evaluate(evaluator, cache, shown, key)
    logits, value, score, score_mean, score_stdev, ownership = evaluations
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
        zeros = jnp.zeros_like(score)
        return _Children(out, children, score, mean, stdev, zeros, ownership, cache)
    # The child's player is the one who did not move (an illegal choice's copy of the
    # parent keeps the chooser to move).
    player = -parents.to_play.astype(jnp.int32)
    score_utility = utility(mean, stdev, player).astype(jnp.float32)
    return _Children(out, children, score, mean, stdev, score_utility, ownership, cache)


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
    # The interior rule before its tie-break, where it is a PUCT rule:
    # ``(tree, node, depth) -> ([A] scores, [A] invalid)``, the rule's choice being
    # ``first_argmax(scores + _selection.tie_break(key, A), invalid)``; the descent then
    # draws the tie-break only at the levels where it can change some game's choice.
    interior_scores: Callable[..., tuple[jax.Array, jax.Array]] | None = None


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
        if rules.interior_scores is not None:
            return start  # the batched descent below goes on from the root's step
        _, node, action, _, _, _ = jax.lax.while_loop(lambda state: state[-1], body, start)
        return node, action

    if rules.interior_scores is None:
        return jax.vmap(one)(keys, tree, root_pending)
    return _descend(jax.vmap(one)(keys, tree, root_pending), tree, rules, max_depth)


def _descend(start, tree: Tree, rules: _Rules, max_depth: int):
    """The interior levels of :func:`_simulate`'s descents for ``[B]`` trees, from the
    root's step ``start = (keys, node, action, child, depth, going)`` (each ``[B]``), under
    a PUCT rule's ``interior_scores``: each level's scores for every game, the tie-break
    drawn (for every game, from the same keys as the plain rule) only when it can change
    some still-going game's choice. The same choices as the vmapped loop, bit for bit.
    Returns ``(node [B], action [B])``."""
    batch = tree.node_visits.shape[0]
    rows = jnp.arange(batch)
    num_actions = tree.children_index.shape[-1]

    def body(state):
        keys, _, _, node, depth, going = state
        split = jax.vmap(jax.random.split)(keys)
        keys, select_keys = split[:, 0], split[:, 1]
        scores, invalid = jax.vmap(rules.interior_scores)(tree, node, depth)
        ambiguous = going & jax.vmap(_selection.tie_break_matters)(scores, invalid)
        scores = jax.lax.cond(
            jnp.any(ambiguous),
            lambda: scores + jax.vmap(_selection.tie_break, (0, None))(select_keys, num_actions),
            lambda: scores,
        )
        action = jax.vmap(_selection.first_argmax)(scores, invalid)
        child = tree.children_index[rows, node, action]
        depth = depth + 1
        go_on = (
            (child != Tree.UNVISITED)
            & (depth < max_depth)
            & ~tree.embeddings.terminated[rows, jnp.maximum(child, 0)]
        )
        new = (keys, node.astype(jnp.int32), action, child, depth, go_on)

        def keep(n, o):  # raw uint32 keys have an axis more than ``going``
            return jnp.where(going.reshape(going.shape + (1,) * (n.ndim - 1)), n, o)

        return jax.tree.map(keep, new, state)

    _, node, action, _, _, _ = jax.lax.while_loop(lambda s: jnp.any(s[-1]), body, start)
    return node, action


def _expand(
    tree: Tree,
    key,
    evaluator,
    parent,
    action,
    child,
    active,
    moves,
    utility=None,
    counted=None,
    cache: NNCache | None = None,
) -> tuple[Tree, NNCache | None]:
    """Evaluate the edges ``(parent, action)`` into nodes ``child`` for the ``active`` games.

    ``parent, action, child, active``: ``[B]``, one edge per game, or ``[B, K]``, ``K``
    edges per game (a batched search's step, ``gojax._virtual_loss``: all ``B * K``
    evaluated in one evaluator call, the inactive ones shown as finished games). Edges
    active in one game are distinct. ``counted`` (default ``active``; ``[B, K]``): the
    visits to add at each ``child``, where a repeated edge adds one more visit to its
    node. ``moves`` and ``utility`` are for ``[B]`` states, as the search's. ``cache``:
    the network cache (``gojax._nn_cache``), given back with the tree.
    """
    single = parent.ndim == 1  # then the plain loop's very operations, bit for bit
    batch, nodes = tree.node_visits.shape
    rows = jnp.arange(batch) if single else jnp.arange(batch)[:, None]
    shape = parent.shape

    def flat(x):  # [B, K, ...] -> [B * K, ...] (no -1: a field may have 0-sized axes)
        return x if single else x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])

    def unflat(x):  # [B * K, ...] -> [B, K, ...]
        return x if single else x.reshape(shape + x.shape[1:])

    if not single:  # the search's per-game closures, over the K columns
        moves = moves and _per_column(moves, unflat, flat)
        utility = utility and _per_column(utility, unflat, flat)
    parent_states = jax.tree.map(lambda x: flat(x[rows, parent]), tree.embeddings)
    action_legal = tree.children_prior_logits[rows, parent, action] > ILLEGAL_THRESHOLD
    skip = None if single else flat(~active)
    step = _step(
        evaluator,
        key,
        parent_states,
        flat(action),
        flat(action_legal),
        moves,
        utility,
        skip,
        cache,
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

    tree = tree.replace(
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
    return tree, step.cache


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


def _run_simulations(
    tree: Tree,
    key,
    evaluator,
    rules: _Rules,
    target_visits: jax.Array | int,
    max_depth: int,
    moves,
    utility: ScoreUtility | None = None,
    cache: NNCache | None = None,
):
    """Simulate until every root has ``target_visits`` (an int or ``[B]``) visits; returns
    the tree, the simulations run, ``[B]``, and the network cache the evaluations went
    through (``gojax._nn_cache``; None without one)."""
    batch = tree.node_visits.shape[0]
    rows = jnp.arange(batch)

    target_visits = jnp.broadcast_to(jnp.asarray(target_visits, jnp.int32), (batch,))

    def cond(carry):
        _, tree, _, _, _ = carry
        return jnp.any(tree.node_visits[:, Tree.ROOT_INDEX] < target_visits)

    def body(carry):
        key, tree, num_nodes, count, cache = carry
        key, simulate_key, expand_key = jax.random.split(key, 3)
        active = tree.node_visits[:, Tree.ROOT_INDEX] < target_visits
        parent, action = _simulate(jax.random.split(simulate_key, batch), tree, rules, max_depth)
        existing = tree.children_index[rows, parent, action]
        is_new = existing == Tree.UNVISITED
        # As in mctx, a node first expanded by a simulation takes the next free index.
        child = jnp.where(is_new, num_nodes, existing)
        child = jnp.where(active, child, Tree.ROOT_INDEX)  # inactive games write nothing
        tree, cache = _expand(
            tree, expand_key, evaluator, parent, action, child, active, moves, utility, None, cache
        )
        tree = _backward(tree, child)
        num_nodes = num_nodes + (is_new & active)
        return key, tree, num_nodes, count + active, cache

    num_nodes = jnp.sum(tree.node_visits > 0, axis=1, dtype=jnp.int32)
    zero = jnp.zeros(batch, jnp.int32)
    start = (key, tree, num_nodes, zero, cache)
    _, tree, _, count, cache = jax.lax.while_loop(cond, body, start)
    return tree, count, cache


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
    cache: NNCache | None = None,
):
    """:func:`_run_simulations` in steps of ``leaf_batch`` descents per game under virtual
    loss (``gojax._virtual_loss.run_simulations``); the same trees at ``leaf_batch = 1``."""

    def descend(keys, tree, root_pending):
        return _simulate(keys, tree, rules, max_depth, root_pending)

    def expand(tree, cache, key, parent, action, child, write, counted=None):
        return _expand(
            tree, key, evaluator, parent, action, child, write, moves, utility, counted, cache
        )

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
        cache=cache,
    )
