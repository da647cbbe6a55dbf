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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx
from mctx._src import seq_halving

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


def puct(key, tree: Tree, node, depth, *, pb_c_init: float, pb_c_base: float) -> jax.Array:
    """AlphaZero / MuZero PUCT (MuZero's Appendix B), Q normalised by parent and siblings."""
    visits = tree.children_visits[node]
    node_visits = tree.node_visits[node]
    pb_c = pb_c_init + jnp.log((node_visits + pb_c_base + 1.0) / pb_c_base)
    priors = jax.nn.softmax(tree.children_prior_logits[node])
    exploration = jnp.sqrt(node_visits) * pb_c * priors / (visits + 1)
    value = mctx.qtransform_by_parent_and_siblings(tree, node)
    tie_break = 1e-7 * jax.random.uniform(key, (tree.num_actions,))
    return first_argmax(value + exploration + tie_break, tree.root_invalid_actions * (depth == 0))


def gumbel_root(
    key, tree: Tree, node, *, num_simulations: int, max_num_considered_actions: int
) -> jax.Array:
    """Sequential halving with Gumbel (Danihelka et al. 2022): the considered action whose
    ``gumbel + logits + completed Q`` is highest among those with the fewest visits the
    halving schedule allows now."""
    del key
    visits = tree.children_visits[node]
    completed_q = mctx.qtransform_completed_by_mix_value(tree, node)
    table = jnp.array(
        seq_halving.get_table_of_considered_visits(max_num_considered_actions, num_simulations)
    )
    num_valid = jnp.sum(1 - tree.root_invalid_actions, axis=-1).astype(jnp.int32)
    considered = jnp.minimum(max_num_considered_actions, num_valid)
    considered_visit = table[considered, jnp.sum(visits, -1)]
    score = seq_halving.score_considered(
        considered_visit,
        tree.extra_data.root_gumbel,
        tree.children_prior_logits[node],
        completed_q,
        visits,
    )
    return first_argmax(score, tree.root_invalid_actions)


def gumbel_interior(key, tree: Tree, node, depth) -> jax.Array:
    """Below the root: the action whose visit share lags ``softmax(logits + completed Q)`` most."""
    del key, depth
    visits = tree.children_visits[node]
    completed_q = mctx.qtransform_completed_by_mix_value(tree, node)
    improved = jax.nn.softmax(tree.children_prior_logits[node] + completed_q)
    return first_argmax(improved - visits / (1 + jnp.sum(visits, axis=-1, keepdims=True)))
