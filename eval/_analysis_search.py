"""The analysis engine's device programs: search, evaluation, and a search run in parts.

``_device_functions`` builds the two jitted programs every batch runs, a batched search
(``gojax.search.search``) whose output is cut to what the host reads, and one network
evaluation of each position and of the positions after its listed moves.
``_search_in_parts`` runs one search in resumed parts, to report during it, stop it at
a time limit or at a terminate; ``_used_nodes`` sends the host only the nodes a search
grew. Batches are padded to powers of two (``_bucket``) so that a handful of compiled
programs serve every batch. Apart from the replay (``eval._analysis_replay``), which
only plays moves, and from the replies (``eval._analysis_reply``), which only read
the host's numbers.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from eval.players import optimism_modules
from gojax import GoState, play
from gojax.katago_features import forget_history
from gojax.search import NODE_FIELDS


def _bucket(n: int, limit: int | None = None, smallest: int = 1) -> int:
    """The padded size of ``n`` items: a power of two, at least ``smallest``, at most ``limit``."""
    padded = max(smallest, 1 << max(n - 1, 0).bit_length())
    return padded if limit is None else max(n, min(padded, limit))


# One program: run eagerly, its selects cost a cached 19x19 query about 9%.
_forget_history = jax.jit(forget_history)


@jax.jit
def _take(states: GoState, rows: jax.Array) -> GoState:
    """``states[rows]`` for every field, as one program."""
    return jax.tree.map(lambda x: x[rows], states)


class _Ends(NamedTuple):
    """What the host reads of the tree's states: which nodes end the game
    (``principal_variation``) and who is to move at each (whose view a node's scores
    take, ``subtree_score_distributions``)."""

    terminated: jax.Array  # [B, N] bool
    to_play: jax.Array  # [B, N] int8


def _device_functions(model: Any, symmetry: int | str, optimism: tuple[float, float] = (0.0, 0.0)):
    """Jitted ``search(variables, states, key, config, avoid, ...) -> (output, tree, cache)``:
    the output without its tree; the whole tree, which stays on the device
    (``_used_nodes`` cuts what the host reads; the ``tree`` to resume it from, donated);
    and the network cache given (``cache=``, donated; ``gojax.search.new_cache``) with
    the search's evaluations stored, or None;
    ``new_cache(variables, states, ownership, size_log2)``, an empty one for the search's
    evaluator with or without ownership; and
    ``evaluate(variables, states [B], actions [B, K], key) -> outputs [B, 1 + K, ...]``
    (row 0 the position itself, row ``1 + k`` after ``actions[:, k]``). ``optimism``:
    ``(root, below)`` policy optimism; ``evaluate`` uses the root's.

    A search given ``stop_at`` (root visits, ``[B]``) stops there. A tree sized for more
    visits than ``stop_at`` asks is the same search as one sized for them (nodes are
    added in order), so one program serves every budget up to its size."""
    from gojax.evaluate import evaluate
    from gojax.search import katago_evaluator, new_cache, search

    version = model.output_spec
    net, root_net = optimism_modules(model, optimism)

    @functools.partial(
        jax.jit,
        static_argnames=("config", "ownership"),
        donate_argnames=("cache", "tree"),
    )
    def run_search(
        variables,
        states,
        key,
        config,
        avoid,
        ownership=False,
        tree=None,
        stop_at=None,
        cache=None,
    ):
        def leaf_evaluator(module):
            return katago_evaluator(
                (module, variables, version), symmetry=symmetry, ownership=ownership
            )

        root_evaluator = None if root_net is None else leaf_evaluator(root_net)
        result = search(
            leaf_evaluator(net),
            states,
            key,
            config,
            avoid=avoid,
            root_evaluator=root_evaluator,
            tree=tree,
            stop_at=stop_at,
            resume=tree is not None,
            cache=cache,
        )
        # The tree and the cache stay on the device, apart from the output the host reads
        # (``_used_nodes`` cuts what it reads of the tree): a second copy of a tree of
        # 65,536 nodes in the output costs more than its search of a part.
        return result.replace(tree=None, cache=None), result.tree, result.cache

    @functools.partial(jax.jit, static_argnames=("ownership", "size_log2"))
    def make_cache(variables, states, ownership, size_log2):
        evaluator = katago_evaluator(
            (net, variables, version), symmetry=symmetry, ownership=ownership
        )
        return new_cache(evaluator, states, jax.random.key(0), size_log2)

    @jax.jit
    def run_evaluate(variables, states, actions, key):
        batch, listed = actions.shape
        if listed:
            children = jax.vmap(jax.vmap(play, in_axes=(None, 0)))(states, actions)
            states = jax.tree.map(
                lambda r, c: jnp.concatenate([r[:, None], c], axis=1).reshape(
                    (batch * (1 + listed),) + r.shape[1:]
                ),
                states,
                children,
            )
        out = evaluate(
            root_net or net, variables, states, version=version, symmetry=symmetry, key=key
        )
        return {k: v.reshape((batch, 1 + listed) + v.shape[1:]) for k, v in out.items()}

    return run_search, make_cache, run_evaluate


# A search run in parts (to report as it goes, or to stop at a time limit) adds at least
# 1/_MOST_PARTS of its visits a part: at most about this many parts...
_MOST_PARTS = 100
# ... but never more than this many visits a part unless its speed says so: a long search
# (KaTrain's pondering asks for 10,000,000 visits) reports at the cadence asked for, and its
# first part, which measures its speed, is short.
_LEAST_PART_CAP = 64


def _search_in_parts(
    search: Callable[..., tuple[Any, Any]],
    key: jax.Array,
    goals: list[int],
    batch: int,
    schedule: list[tuple[float, float]],
    limits: list[float],
    report: Callable[[Any, np.ndarray], None],
    stopped: Callable[[], list[int]] | None = None,
    poll: float = math.inf,
    rate: float | None = None,
) -> tuple[Any, float]:
    """Run ``search(key, tree=..., stop_at=...) -> (output, tree)``
    (``batch`` positions, the first ``len(schedule)`` real) to ``goals[i]`` root visits
    each in parts, as KataGo reports during a search and stops at ``maxTime``: position
    ``i`` is reported (``report((output, tree), rows)``, before the next part takes the
    tree)
    ``schedule[i] = (first, every)`` seconds after the start, then every ``every``
    seconds, and stops growing once its search has run ``limits[i]`` seconds (its rows of
    ``stop_at`` stay where they are while the others go on), or when ``stopped()``
    (asked between parts, at least every ``poll`` seconds) names it (a terminate).
    Each part is sized from the last one's speed (the first from ``rate``, visits a
    second, if known; else it is a short one that measures it) to end at the next
    report, limit or poll; the parts resume one search (``gojax.search.search``'s
    ``resume``), so the last ``(output, tree)`` is the one search's (a position stopped
    by its limit: with the visits it had). Returns it and the last part's speed."""
    real = len(schedule)
    due = np.array([first for first, _ in schedule], np.float64)
    every = np.array([gap for _, gap in schedule], np.float64)
    limit = np.asarray(limits, np.float64)
    goal = np.ones(batch, np.int64)  # padding rows: no simulations
    goal[:real] = goals
    visits = int(goal.max())
    done = np.ones(batch, np.int64)
    least = max(1, min(visits // _MOST_PARTS, _LEAST_PART_CAP))
    start = time.monotonic()
    tree, part = None, 0
    while True:
        live = done[:real] < goal[:real]
        wait = min(due[live].min(initial=math.inf), limit[live].min(initial=math.inf))
        wait = min(wait - (time.monotonic() - start), poll)
        if not math.isfinite(wait):
            step = visits
        elif rate is None:  # a first part measures the speed
            step = least
        else:
            step = max(least, int(rate * max(wait, 0.0)))
        target = np.minimum(goal, done + step)
        began = time.monotonic()
        output, tree = search(
            jax.random.fold_in(key, part),
            tree=tree,
            stop_at=jnp.asarray(target, jnp.int32),
        )
        part += 1
        jax.block_until_ready(tree)
        rate = int((target - done).max(initial=0)) / max(time.monotonic() - began, 1e-6)
        done = target
        now = time.monotonic() - start
        out_of_time = (now >= limit) & (done[:real] < goal[:real])
        goal[:real][out_of_time] = done[:real][out_of_time]
        if stopped is not None:
            rows = np.asarray(stopped(), np.int64)
            goal[rows] = done[rows]
        live = done[:real] < goal[:real]
        if not live.any():
            return (output, tree), rate
        rows = np.flatnonzero(live & (due <= now))
        if rows.size:
            report((output, tree), rows)
            due[rows] = np.maximum(due[rows] + every[rows], time.monotonic() - start)


# The tree's fields indexed by node, as the host receives them (``_Ends`` too): the prior
# logits are cut to the root's by the search program already.
_NODE_FIELDS = tuple(name for name in NODE_FIELDS if name != "children_prior_logits")


def _host_tree(tree: Any, keep_nodes: bool) -> Any:
    """What the host reads of a search's tree: only the root's prior and the statistics
    a PV needs, not the states nor, unless the moves' means are wanted (``keep_nodes``),
    the nodes' ownership (the root's mean is the output's ``ownership``)."""
    ownership = tree.raw_ownership
    return tree.replace(
        embeddings=_Ends(tree.embeddings.terminated, tree.embeddings.to_play),
        children_prior_logits=tree.children_prior_logits[:, :1],
        raw_ownership=ownership if keep_nodes else ownership[:, :, :0],
    )


@functools.partial(jax.jit, static_argnames=("nodes", "keep_nodes"))
def _first_nodes(output: Any, tree: Any, nodes: int, keep_nodes: bool) -> Any:
    """A search output with what the host reads of ``tree`` cut to its first ``nodes``
    nodes."""
    host = _host_tree(tree, keep_nodes)
    cut = {name: getattr(host, name)[:, :nodes] for name in _NODE_FIELDS}
    ends = jax.tree.map(lambda x: x[:, :nodes], host.embeddings)
    return output.replace(tree=host.replace(**cut, embeddings=ends))


def _used_nodes(output: Any, tree: Any, keep_nodes: bool) -> Any:
    """``output`` (on the device) with what the host reads of its kept ``tree`` (the
    search's whole tree), cut to the nodes in use (a power of two at least as many), so
    that a search stopped early, in a tree sized for many more visits, sends the host
    only what it grew: a node is added at most once a visit, so the root's visits bound
    them. ``keep_nodes``: with every node's ownership (``_host_tree``)."""
    capacity = tree.node_visits.shape[1]
    used = int(jnp.max(tree.node_visits[:, 0]))
    return _first_nodes(output, tree, _bucket(used, capacity), keep_nodes)


# ----------------------------------------------------------------------------
# Replies
