"""Reading and re-rooting finished ``mctx`` search trees over Go positions.

mctx builds a fresh tree for every search and has no API to keep the part of
it below the move that was played. :func:`reuse_subtree` cuts that part out
and renumbers it into a tree of the same capacity, so that the next
``gojax.search.search(..., tree=...)`` continues from its statistics.

Conventions of the trees read here (``B`` games, ``N`` nodes, ``A = P + 1``
actions): node 0 is the root; a node's index is larger than its parent's
(mctx creates nodes in index order, and the renumbering keeps that order);
``tree.embeddings`` is a ``[B, N]`` ``GoState``; values are from the point of
view of the player to move at the node, ``children_rewards`` and
``children_discounts`` turn a child's value into its parent's view (discount
-1 between plies, 0 below a finished game).
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np


@chex.dataclass(frozen=True)
class Tree(mctx.Tree):
    """mctx's tree and the node statistics that gojax's search also backs up, ``[B, N]``.

    mctx keeps one number per node, the mean value. An analysis wants the
    mean final score below a move (KataGo's ``scoreLead`` is such a mean, not
    one network evaluation) and how much the values under a move disagree
    (for a lower confidence bound); KataGo's search also weighs the score
    (``gojax._utility``). All are averaged over the same visits as
    ``node_values``, by the same backup.

    A node's *utility* is ``node_values + node_score_utilities``: the value,
    plus KataGo's score utility under ``SearchConfig(kind="katago")`` (0 under
    every other kind, where the utility is the value).

    Attributes (besides mctx's):
      node_scores: mean score in points for the player to move at the node:
        the evaluator's score at a leaf (0 from evaluators without one), the
        rules' count at a finished game, each negated once per ply on the
        way up.
      node_score_utilities: mean score utility for the player to move at the
        node, negated once per ply as scores are.
      raw_score_utilities: the score utility of the node's own evaluation
        (``raw_values``' counterpart).
      raw_score_means, raw_score_stdevs: the score distribution of the node's
        own evaluation (a finished game's count and its fixed spread), in the
        same player's view: what a later search recomputes the score
        utilities from when its centre moves (``gojax.search``).
      node_utility_squares: mean of the squared utilities backed up through
        the node, so that ``node_utility_squares - utility ** 2`` is their
        variance.
      raw_ownership: ``[B, N, P]`` the ownership of the node's own evaluation,
        Black's view (+1 Black's), when the search tracks ownership
        (``katago_evaluator(ownership=True)``); ``[B, N, 0]`` otherwise. Not
        backed up: a subtree's mean is its nodes' weighted by their own
        visits (``gojax.search.tree_ownership``), as KataGo averages its tree.
    """

    node_scores: chex.Array
    node_score_utilities: chex.Array
    raw_score_utilities: chex.Array
    raw_score_means: chex.Array
    raw_score_stdevs: chex.Array
    node_utility_squares: chex.Array
    raw_ownership: chex.Array


class RootStats(NamedTuple):
    """Statistics of the root's children, ``[B, A]`` each (``A = P + 1``, pass last)."""

    visits: jax.Array  # [B, A] int32: visits of each root child
    q: jax.Array  # [B, A] float32: mean value of each child for the player to move at the root,
    #   in [-1, 1]; 0 where the child was never visited
    prior: jax.Array  # [B, A] float32: the root's prior (after any root noise), sums to 1
    value: jax.Array  # [B] float32: the root's search value for the player to move
    score: jax.Array  # [B, A] float32: mean score (points) of each child for the player to
    #   move at the root; 0 where unvisited
    q_stdev: jax.Array  # [B, A] float32: standard deviation of the utilities averaged into
    #   ``utility`` (of q itself unless the search weighs scores; 0 for an unvisited child or
    #   a finished game's)
    root_score: jax.Array  # [B] float32: the root's mean score for the player to move
    utility: jax.Array  # [B, A] float32: mean utility of each child for the player to move
    #   at the root: q plus its score utility (see Tree); q where the search weighs no score


def root_stats(tree: Tree) -> RootStats:
    """Per-root-child visits, Q and score (mover's view), spread of Q and prior of a tree."""
    root = Tree.ROOT_INDEX
    visits = tree.children_visits[:, root]
    discounts = tree.children_discounts[:, root]
    q = tree.children_rewards[:, root] + discounts * tree.children_values[:, root]
    q = jnp.where(visits > 0, q, 0.0)
    prior = jax.nn.softmax(tree.children_prior_logits[:, root], axis=-1)
    children = tree.children_index[:, root]  # [B, A]
    at_child = jnp.maximum(children, 0)

    def child(x):  # a node statistic of each root child, 0 where unvisited
        got = jnp.take_along_axis(x, at_child, axis=1)
        return jnp.where((visits > 0) & (children >= 0), got, 0.0)

    # A child's value and score are from its own mover's view: the root's mover sees
    # them negated. Its utilities' variance is the same from either side; a finished
    # game (discount 0) is one fixed result.
    score = -child(tree.node_scores)
    score_utility = child(tree.node_score_utilities)
    utility = q - score_utility
    variance = child(tree.node_utility_squares) - (child(tree.node_values) + score_utility) ** 2
    q_stdev = jnp.sqrt(jnp.maximum(variance, 0.0)) * jnp.abs(discounts)
    return RootStats(
        visits,
        q,
        prior,
        tree.node_values[:, root],
        score,
        q_stdev,
        tree.node_scores[:, root],
        utility,
    )


def principal_variation(
    tree: Tree, batch_index: int = 0, first_action: int | None = None, max_length: int = 32
) -> list[int]:
    """Actions from the root of game ``batch_index`` along the most visited children.

    Runs on the host (it reads the tree with NumPy), for GTP ``pv`` output.
    With ``first_action`` the line starts with that root move (which GTP
    analysis reports per candidate) and then follows the most visited
    children below it. Ties go to the child with the higher Q for the player
    choosing. The line stops at ``max_length`` actions, at a node without
    visited children, or after a move that ends the game.
    """
    children = np.asarray(tree.children_index[batch_index])  # [N, A]
    visits = np.asarray(tree.children_visits[batch_index])  # [N, A]
    q = np.asarray(
        tree.children_rewards[batch_index]
        + tree.children_discounts[batch_index] * tree.children_values[batch_index]
    )
    terminated = np.asarray(tree.embeddings.terminated[batch_index])  # [N]
    line: list[int] = []
    node = Tree.ROOT_INDEX
    if first_action is not None:
        line.append(int(first_action))
        node = int(children[node, first_action])
    while node != Tree.UNVISITED and not terminated[node] and len(line) < max_length:
        if visits[node].max() == 0:
            break
        # Most visits first, then higher Q (lexsort's last key is the primary one).
        action = int(np.lexsort((q[node], visits[node]))[-1])
        line.append(action)
        node = int(children[node, action])
    return line[:max_length]


def _root_moves_above(tree: Tree, batch_index: int) -> tuple[np.ndarray, np.ndarray]:
    """``[N]`` the root move above each node of game ``batch_index`` (``Tree.NO_PARENT``
    for the root and blank nodes) and ``[N]`` the visits that ended at each node (its own
    evaluation's weight in a subtree's mean, as KataGo weighs it). Host, NumPy."""
    parents = np.asarray(tree.parents[batch_index])  # [N]
    moves = np.asarray(tree.action_from_parent[batch_index])
    visits = np.asarray(tree.node_visits[batch_index])
    own = (visits - np.asarray(tree.children_visits[batch_index]).sum(-1)).astype(np.float64)
    nodes = np.arange(len(parents))
    # Each node's ancestor among the root's children, by pointer jumping: a root child
    # and the root (and blank nodes) point at themselves.
    up = np.where((parents == Tree.ROOT_INDEX) | (parents < 0), nodes, parents)
    for _ in range(max(1, (len(parents) - 1).bit_length())):
        up = up[up]
    below = np.where(up != Tree.ROOT_INDEX, moves[up], Tree.NO_PARENT)
    return below, own


def _subtree_moments(
    below: np.ndarray, own: np.ndarray, values: np.ndarray, squares: np.ndarray, action: int
) -> tuple[np.ndarray, np.ndarray]:
    """The mean of ``values [N, ...]`` over the nodes below root move ``action`` (all
    nodes for ``Tree.NO_PARENT``), each weighted by its own visits, and the standard
    deviation given each node's mean square ``squares``; NaN where none was visited."""
    weight = own if action == Tree.NO_PARENT else np.where(below == action, own, 0.0)
    total = weight.sum()
    if total <= 0:
        nan = np.full(values.shape[1:], np.nan)
        return nan, nan
    mean = np.tensordot(weight, values, axes=1) / total
    variance = np.tensordot(weight, squares, axes=1) / total - mean**2
    return mean, np.sqrt(np.maximum(variance, 0.0))


def subtree_ownership(
    tree: Tree, batch_index: int, actions: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``[K, P]`` the mean ownership below each root move of ``actions`` in game
    ``batch_index`` (Black's view), as KataGo averages a move's subtree: the evaluations
    of the child and every node under it, each weighted by the visits that ended there;
    and ``[K, P]`` its standard deviation over them. NaN rows for moves never searched.
    Runs on the host (NumPy); needs a tree that kept its nodes' ownership
    (``Tree.raw_ownership``).
    """
    below, own = _root_moves_above(tree, batch_index)
    ownership = np.asarray(tree.raw_ownership[batch_index], np.float64)  # [N, P]
    means = np.full((len(actions), ownership.shape[1]), np.nan)
    stdevs = means.copy()
    for k, action in enumerate(actions):
        means[k], stdevs[k] = _subtree_moments(below, own, ownership, ownership**2, action)
    return means.astype(np.float32), stdevs.astype(np.float32)


def subtree_score_distributions(
    tree: Tree, batch_index: int, actions: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``[1 + K]`` the mean final score the evaluations below the root (row 0) and below
    each root move of ``actions`` (row ``1 + k``) expect, for the player to move at the
    root, and ``[1 + K]`` its spread: KataGo's ``scoreSelfplay`` and ``scoreStdev`` of a
    node, each evaluation's score distribution (``Tree.raw_score_means`` and
    ``raw_score_stdevs``) weighted by the visits that ended there, so that the spread
    holds both the evaluations' own and their disagreement,
    ``sqrt(E[mean**2 + stdev**2] - E[mean]**2)``. NaN for moves never searched. Runs on
    the host (NumPy); reads the nodes' players from ``tree.embeddings.to_play``.
    """
    below, own = _root_moves_above(tree, batch_index)
    parents = np.asarray(tree.parents[batch_index])
    to_play = np.asarray(tree.embeddings.to_play[batch_index]).astype(np.int64)
    # A node's numbers are for the player who did not choose its move (the root's: its
    # mover); +1 where that is the root's mover.
    views = np.where(parents >= 0, -to_play[np.maximum(parents, 0)], to_play) * to_play[0]
    means = np.asarray(tree.raw_score_means[batch_index], np.float64) * views
    stdevs = np.asarray(tree.raw_score_stdevs[batch_index], np.float64)
    rows = [Tree.NO_PARENT, *actions]
    moments = [_subtree_moments(below, own, means, means**2 + stdevs**2, a) for a in rows]
    return (
        np.array([m for m, _ in moments], np.float32),
        np.array([s for _, s in moments], np.float32),
    )


def _reroot(tree: Tree, action: jax.Array) -> Tree:
    """One game's tree (no batch axis) re-rooted at the child reached by ``action``."""
    n = tree.node_visits.shape[0]
    child = tree.children_index[Tree.ROOT_INDEX, action]
    # ``child == UNVISITED`` (the move was never searched) selects nothing: an empty tree.
    sink = jnp.where(child >= 0, child, n)

    # Pointer jumping: make the child and the root absorbing, then double the
    # jump length until every node points at one of them (depth <= N, so
    # ceil(log2 N) rounds). O(N log N) vector work instead of an N-step scan.
    up = jnp.where(tree.parents >= 0, tree.parents, Tree.ROOT_INDEX)
    up = up.at[sink].set(sink, mode="drop")
    for _ in range(max(1, (n - 1).bit_length())):
        up = up[up]
    keep = (up == sink) & (tree.node_visits > 0)  # [N]: the child's subtree

    # Keep the nodes' order: parents stay before children and the child becomes node 0.
    new_index = jnp.cumsum(keep, dtype=jnp.int32) - 1  # [N] new index of each kept node
    old_index = (
        jnp.zeros(n, jnp.int32)
        .at[jnp.where(keep, new_index, n)]
        .set(jnp.arange(n, dtype=jnp.int32), mode="drop")
    )  # [N] old index of each new node
    used = jnp.arange(n) < jnp.sum(keep)  # [N] new slots that hold a node

    def take(x, blank):
        moved = x[old_index]
        mask = used.reshape((n,) + (1,) * (x.ndim - 1))
        return jnp.where(mask, moved, jnp.asarray(blank, x.dtype))

    def renumber(index):  # old node indices -> new ones, UNVISITED kept
        return jnp.where(index >= 0, new_index[jnp.maximum(index, 0)], Tree.UNVISITED)

    parents = take(renumber(tree.parents), Tree.NO_PARENT)
    parents = parents.at[Tree.ROOT_INDEX].set(Tree.NO_PARENT)
    action_from_parent = take(tree.action_from_parent, Tree.NO_PARENT)
    action_from_parent = action_from_parent.at[Tree.ROOT_INDEX].set(Tree.NO_PARENT)
    prior_logits = take(tree.children_prior_logits, 0.0)
    return tree.replace(
        node_visits=take(tree.node_visits, 0),
        raw_values=take(tree.raw_values, 0.0),
        node_values=take(tree.node_values, 0.0),
        node_scores=take(tree.node_scores, 0.0),
        node_score_utilities=take(tree.node_score_utilities, 0.0),
        raw_score_utilities=take(tree.raw_score_utilities, 0.0),
        raw_score_means=take(tree.raw_score_means, 0.0),
        raw_score_stdevs=take(tree.raw_score_stdevs, 0.0),
        node_utility_squares=take(tree.node_utility_squares, 0.0),
        raw_ownership=take(tree.raw_ownership, 0.0),
        parents=parents,
        action_from_parent=action_from_parent,
        children_index=take(renumber(tree.children_index), Tree.UNVISITED),
        children_prior_logits=prior_logits,
        children_visits=take(tree.children_visits, 0),
        children_rewards=take(tree.children_rewards, 0.0),
        children_discounts=take(tree.children_discounts, 0.0),
        children_values=take(tree.children_values, 0.0),
        embeddings=jax.tree.map(lambda x: take(x, 0), tree.embeddings),
        # Illegal moves carry the lowest logits (see gojax.search); the next
        # search recomputes this mask from the position anyway.
        root_invalid_actions=(prior_logits[Tree.ROOT_INDEX] < ILLEGAL_THRESHOLD).astype(
            tree.root_invalid_actions.dtype
        ),
    )


def reuse_subtree(tree: Tree, action: jax.Array) -> Tree:
    """``[B]`` trees → the subtrees below root action ``action [B]``, as new ``[B]`` trees.

    The child's subtree keeps everything the search learnt: visits, values,
    scores, raw values, priors, rewards, discounts and the positions (embeddings);
    nodes are renumbered from 0 in their old order and parents and children
    indices follow. The capacity stays the same; freed slots are blank. An
    action whose child was never expanded gives an empty tree, which
    ``search`` replaces by a fresh one. ``extra_data`` is kept as it is.
    Jittable.
    """
    action = jnp.asarray(action, jnp.int32)
    extra = tree.extra_data
    rerooted = jax.vmap(_reroot)(tree.replace(extra_data=None), action)
    return rerooted.replace(extra_data=extra)


# Logits at or below this mark illegal moves in gojax search trees (they are
# set to the float32 minimum; legal logits are clipped far above).
ILLEGAL_LOGIT = float(np.finfo(np.float32).min)
ILLEGAL_THRESHOLD = ILLEGAL_LOGIT / 2
