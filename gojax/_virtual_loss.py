"""Virtual loss: ``K`` descents per tree and step, their leaves evaluated in one call.

``gojax.search`` with ``SearchConfig.leaf_batch = K > 1`` runs its simulations in
steps. A step descends each game's tree ``K`` times, one after the other, then
evaluates all the new leaves of all ``B`` games in one evaluator call (``B * K``
positions: a network runs far more positions per second in a batch of ``B * K``
than of ``B``), then backs the ``K`` results up, one after the other.

Virtual loss (KataGo's form, ``numVirtualLossesPerThread``): a descent still waiting
for its result counts, for every later descent of the step, as ``n_vl``
(``SearchConfig.virtual_loss``) visits lost by the player who chose each edge of its
path: the edge's visits grow by ``n_vl`` and its mean utility moves toward the worst
one (``-radius``: -1, less KataGo's score utility weights when the search weighs
scores) as ``(u * n - radius * n_vl * m) / (n + n_vl * m)``, ``m`` the pending descents
through it. So the next descent goes elsewhere wherever the rule is unsure. Only edges
(the parent's view of a child) carry virtual loss, as KataGo's ``virtualLosses`` on a
child node weigh only in its parent's selection; node statistics are untouched.

The virtual losses live in a scratch copy of the three edge arrays the rules read
(``children_visits``, ``children_rewards``, ``children_values``), recomputed from the
real statistics at every change and dropped at the end of the step: nothing is ever
subtracted back, so after the backups every count is the real simulations' exactly.

A descent that stops at an edge no descent has expanded yet, and that an earlier
descent of the same step also stopped at, is dropped, as KataGo drops a playout that
finds its leaf being evaluated by another thread: the leaf is evaluated once and
counts once. A step can thus make fewer than ``K`` simulations (rare with ``n_vl > 0``:
a pending edge looks like a loss); the loop goes on until every root has its visits,
so the count is always exact. Descents that end at an existing node (a finished
game, a node at ``max_depth``) all count, as they do one after another in a plain
search; such a node is written (re-evaluated) once per step.

Gumbel: below the root the deterministic rule reads the virtual losses as the others
do. At the root, sequential halving decides which action each simulation visits from
a schedule of visit counts (``mctx``'s table of considered visits). There a pending
descent counts as one visit of its action for the schedule only (``pending`` of
``gojax._selection.gumbel_root``), with no loss in its value: the ``K`` descents of a
step take the schedule's next ``K`` slots, i.e. the next ``K`` considered actions of the
current phase (and, at a phase's end, of the next one), which a sequential search
would visit one at a time. What a batch changes is only which information a choice
sees: an action chosen, or a halving decided, within a step does not see the results
still pending in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from gojax._tree_reuse import Tree


class Scratch(NamedTuple):
    """The edge statistics the descents of one step see, ``[B, N, A]`` each."""

    pending: jax.Array  # int32: descents of this step through the edge so far
    visits: jax.Array  # int32: children_visits plus n_vl per pending descent
    rewards: jax.Array  # float32: the edge's mean value with the virtual losses
    values: jax.Array  # float32: children_values, 0 where ``rewards`` holds the value


def scratch(tree: Tree) -> Scratch:
    """No virtual loss yet: the tree's own edge statistics."""
    return Scratch(
        jnp.zeros_like(tree.children_visits),
        tree.children_visits,
        tree.children_rewards,
        tree.children_values,
    )


def seen(tree: Tree, pending: Scratch) -> Tree:
    """``tree`` as a descent sees it: its edges with the virtual losses."""
    return tree.replace(
        children_visits=pending.visits,
        children_rewards=pending.rewards,
        children_values=pending.values,
    )


def add_virtual_loss(
    tree: Tree,
    pending: Scratch,
    parent: jax.Array,
    action: jax.Array,
    active: jax.Array,
    virtual_loss: int,
    radius: float,
    at_root: bool = True,
) -> Scratch:
    """Count one more pending descent on every edge from the root to ``(parent [B],
    action [B])`` for the ``active [B]`` games.

    Each such edge of ``tree`` (the real statistics: ``n`` visits of mean value ``q``
    for the chooser, whose child's score utility ``s`` is the chooser's ``-s``) is seen
    with ``n + n_vl * m`` visits of mean utility ``(u * n - radius * n_vl * m) / (n + n_vl
    * m)``, ``u = q - s``, ``m`` its pending descents: ``n_vl * m`` lost visits. The value
    goes in ``rewards`` (``values`` 0) so that a finished child's edge (discount 0) shows
    it too. ``at_root`` False leaves the root's edges as they are but their ``pending``
    counts (Gumbel's root: see the module's docstring). A batched walk up the parents,
    as ``gojax._search_simulation._backward``.
    """
    batch, nodes = tree.node_visits.shape
    rows = jnp.arange(batch)
    weight = jnp.float32(virtual_loss)

    def cond(carry):
        return jnp.any(carry[2])

    def body(carry):
        node, act, going, state = carry
        count = state.pending[rows, node, act] + 1
        visits = tree.children_visits[rows, node, act]
        q = (
            tree.children_rewards[rows, node, act]
            + tree.children_discounts[rows, node, act] * tree.children_values[rows, node, act]
        )
        child = tree.children_index[rows, node, act]
        utility = jnp.where(child >= 0, tree.node_score_utilities[rows, jnp.maximum(child, 0)], 0.0)
        lost = weight * count.astype(jnp.float32)
        total = visits.astype(jnp.float32) + lost
        mean = ((q - utility) * visits - radius * lost) / jnp.maximum(total, 1e-30)
        q_seen = jnp.where(lost > 0, mean + utility, q)
        here = jnp.where(going, node, nodes)  # out of range: dropped
        shown = jnp.where(going & (at_root | (node != Tree.ROOT_INDEX)), node, nodes)

        def put(x, new, at):
            return x.at[rows, at, act].set(new.astype(x.dtype), mode="drop")

        state = Scratch(
            put(state.pending, count, here),
            put(state.visits, visits + virtual_loss * count, shown),
            put(state.rewards, q_seen, shown),
            put(state.values, jnp.zeros_like(q_seen), shown),
        )
        up = going & (node != Tree.ROOT_INDEX)
        return (
            jnp.where(up, tree.parents[rows, node], Tree.ROOT_INDEX),
            jnp.where(up, tree.action_from_parent[rows, node], 0),
            up,
            state,
        )

    start = (parent.astype(jnp.int32), action.astype(jnp.int32), active, pending)
    return jax.lax.while_loop(cond, body, start)[-1]


def first_visits(parent: jax.Array, action: jax.Array, active: jax.Array) -> jax.Array:
    """``[B, K]`` bool: whether descent ``k`` is the first active one of its step to stop
    at its edge ``(parent [B, K], action [B, K])`` (false for inactive descents)."""
    k = parent.shape[1]
    same = (parent[:, :, None] == parent[:, None, :]) & (action[:, :, None] == action[:, None, :])
    earlier = jnp.arange(k)[None, :] < jnp.arange(k)[:, None]  # [k, k']: k' before k
    repeated = jnp.any(same & earlier[None] & active[:, None, :], axis=2)
    return active & ~repeated


# ``(keys [B], tree, pending [B, A] | None) -> (parent [B], action [B])``: one descent
# of every tree (``gojax._search_simulation._simulate``), ``pending`` the root's pending descents
# for Gumbel's root rule.
Descend = Callable[[jax.Array, Tree, jax.Array | None], tuple[jax.Array, jax.Array]]
# ``(tree, cache, key, parent, action, child, write, counted=None) -> (tree, cache)``,
# all ``[B, K]``: the edges evaluated (``write``) into their nodes, the visits ``counted``
# at their children, the evaluations through the network cache ``cache`` (None: none;
# ``gojax._search_simulation._expand``); or all ``[B]``, one edge per game, counted once.
Expand = Callable[..., Tree]
# ``(tree, leaf [B]) -> tree``: one backup per game (``gojax._search_simulation._backward``).
Backward = Callable[[Tree, jax.Array], Tree]


def run_simulations(
    tree: Tree,
    key: jax.Array,
    *,
    descend: Descend,
    expand: Expand,
    backward: Backward,
    target_visits: jax.Array | int,
    leaf_batch: int,
    virtual_loss: int,
    radius: float = 1.0,
    halving: bool = False,
    cache: Any = None,
) -> tuple[Tree, jax.Array, Any]:
    """Simulate in steps of ``leaf_batch`` descents per game until every root has
    ``target_visits`` (an int or ``[B]``) visits; returns the tree, the simulations
    run, ``[B]``, and the network cache ``cache`` as the evaluations left it.

    A game's step runs ``min(leaf_batch, target - root visits)`` descents (the last
    step fewer, so that the root ends with exactly its target). ``radius``: the largest
    utility of a visit (a virtual loss is worth ``-radius``). ``halving``: the root rule
    is Gumbel's sequential halving, given the root's pending descents instead of
    virtual losses. The keys split as ``gojax._search_simulation._run_simulations``' do: with
    ``leaf_batch = 1`` the trees are the same, node for node.
    """
    batch = tree.node_visits.shape[0]
    rows = jnp.arange(batch)[:, None]
    k = leaf_batch
    target_visits = jnp.broadcast_to(jnp.asarray(target_visits, jnp.int32), (batch,))

    def cond(carry):
        _, tree, _, _, _ = carry
        return jnp.any(tree.node_visits[:, Tree.ROOT_INDEX] < target_visits)

    def body(carry):
        key, tree, num_nodes, count, cache = carry
        key, simulate_key, expand_key = jax.random.split(key, 3)
        room = jnp.clip(target_visits - tree.node_visits[:, Tree.ROOT_INDEX], 0, k)  # [B]
        if k == 1:  # the plain loop's keys
            keys = jax.random.split(simulate_key, batch)[None]
        else:
            keys = jax.vmap(lambda s: jax.random.split(s, batch))(jax.random.split(simulate_key, k))

        def descent(state, xs):
            index, keys = xs
            active = index < room
            root_pending = state.pending[:, Tree.ROOT_INDEX] if halving else None
            parent, action = descend(keys, seen(tree, state), root_pending)
            state = add_virtual_loss(
                tree, state, parent, action, active, virtual_loss, radius, at_root=not halving
            )
            return state, (parent, action)

        _, (parent, action) = jax.lax.scan(descent, scratch(tree), (jnp.arange(k), keys))
        parent, action = parent.T, action.T  # [B, K]
        active = jnp.arange(k)[None, :] < room[:, None]
        existing = tree.children_index[rows, parent, action]
        is_new = existing == Tree.UNVISITED
        write = first_visits(parent, action, active)
        counted = active & (write | ~is_new)  # a repeat counts unless its leaf is pending
        fresh = counted & is_new
        # New nodes take the next free indices in descent order (mctx's numbering at K = 1).
        order = jnp.cumsum(fresh, axis=1, dtype=jnp.int32) - fresh
        child = jnp.where(is_new, num_nodes[:, None] + order, existing)
        child = jnp.where(counted, child, Tree.ROOT_INDEX)  # a leaf at the root backs up nothing
        if k == 1:  # one edge per game, counted once: the plain loop's own calls
            tree, cache = expand(
                tree, cache, expand_key, parent[:, 0], action[:, 0], child[:, 0], write[:, 0]
            )
            tree = backward(tree, child[:, 0])
        else:
            tree, cache = expand(tree, cache, expand_key, parent, action, child, write, counted)
            tree = jax.lax.fori_loop(0, k, lambda i, tree: backward(tree, child[:, i]), tree)
        num_nodes = num_nodes + jnp.sum(fresh, axis=1, dtype=jnp.int32)
        count = count + jnp.sum(counted, axis=1, dtype=jnp.int32)
        return key, tree, num_nodes, count, cache

    num_nodes = jnp.sum(tree.node_visits > 0, axis=1, dtype=jnp.int32)
    zero = jnp.zeros(batch, jnp.int32)
    start = (key, tree, num_nodes, zero, cache)
    _, tree, _, count, cache = jax.lax.while_loop(cond, body, start)
    return tree, count, cache
