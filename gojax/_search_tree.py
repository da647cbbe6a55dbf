"""Whole-tree operations of :func:`gojax.search.search` on ``[B]`` trees
(``gojax._tree_reuse.Tree``): a fresh tree of roots, padding a kept one, checking and
re-showing its roots, re-rooting it below a move, the statistics read over every node
(the mean score below a root, the tree's ownership) and re-scoring every node when the
score utility's centre moves.

Separate from the simulation loop (``gojax._search_simulation``), which changes one
path of the tree per simulation: these read or rewrite the tree as a whole, between
searches or before and after one. Public names are re-exported by ``gojax.search``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gojax import _tree_reuse
from gojax._board import GoState
from gojax._tree_reuse import Tree


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
    score utility and squared utility become what ``_search_simulation._backward`` would
    have averaged had ``utility`` been used from the start. KataGo recomputes its whole
    tree this way when a new search moves the centre of the dynamic score utility.

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


# The tree's fields indexed by node (axis 1; the states, ``embeddings``, are too).
NODE_FIELDS = (
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

    fields = {name: pad(getattr(tree, name), blanks.get(name, 0)) for name in NODE_FIELDS}
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
