"""The JAX ladder scans of ``[K]`` boards in one ``lax.while_loop``
(:func:`_scan_boards_jax`): each board's chains in KataGo's scan order, or the chains of
all boards shared out among search lanes (with a second pass that keeps the ko point a
budget abort leaks exact), and the ladder planes read off the results.

Separate from the search itself (``gojax._ladder_search``, one board's step) because this
is the schedule, not the search: how many lanes, which chain a free lane takes. See
"Design and cost" in ``gojax._ladders``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gojax._ladder_search import _init, _Loop, _Root, _root, _step


def _planes(root: _Root, laddered: jax.Array, working: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The ladder planes of one board from its per-chain results (at each chain's lowest
    point) and its working moves."""
    p = root.board.shape[-1]
    counts = root.libs.astype(jnp.int32)
    stones = (root.board != 0) & ((counts == 1) | (counts == 2))
    return laddered[jnp.minimum(root.label.astype(jnp.int32), p - 1)] & stones, working


def _scan_in_order(roots: _Root) -> tuple[jax.Array, jax.Array]:
    """Every board's chains one after the other, as KataGo scans them: ``(laddered [K, P],
    working [K, P])`` per chain. Exact in every case, including the ko point that a
    1-liberty search aborted on its budget leaves cleared for the board's later searches."""
    p = roots.board.shape[-1]
    final = jax.lax.while_loop(
        lambda s: jnp.any(s.rep < p),
        lambda s: jax.vmap(_step)(roots, s),
        jax.vmap(_init)(roots),
    )
    return final.laddered, final.working


class _Lanes(NamedTuple):
    """Search lanes that take chains from every board as they come free."""

    loop: _Loop  # [L] per lane: the search state of the chain it is solving (rep P: idle)
    board: jax.Array  # [L] int32: the board of that chain
    taken: jax.Array  # [] int32: chains handed out so far (in board-major, point order)
    laddered: jax.Array  # [K, P] bool: results of the chains solved so far
    working: jax.Array  # [K, P] bool
    aborted: jax.Array  # [K, P] bool: chains whose 1-liberty search aborted with the ko on


def _lanes_pass(roots: _Root, num_lanes: int, ko_on: jax.Array) -> _Lanes:
    """Every chain of every board solved once by ``num_lanes`` lanes, each search from the
    scanned position, with its ko point where ``ko_on [K, P]`` (at the chain's lowest
    point) says so. A lane that finishes a chain takes the next one not yet taken, from
    any board."""
    k, p = roots.board.shape
    flat = roots.scanned.reshape(-1)
    ends = jnp.cumsum(flat, dtype=jnp.int32)  # chains among the first i + 1 flat points
    total = ends[-1]

    def hand_out(numbers):
        """The chains with these queue numbers: ``(board, lowest point)``; P when past the end."""
        at = jnp.minimum(jnp.searchsorted(ends, numbers, side="right"), k * p - 1)
        valid = numbers < total
        return jnp.where(valid, at // p, 0), jnp.where(valid, at % p, p)

    def ko_of(board, rep):
        return ko_on[board, jnp.minimum(rep, p - 1)]

    board, rep = hand_out(jnp.arange(num_lanes, dtype=jnp.int32))
    start = jax.vmap(_init)(jax.tree.map(lambda x: x[board], roots))
    state = _Lanes(
        start._replace(rep=rep.astype(jnp.int32), ko_active=ko_of(board, rep)),
        board.astype(jnp.int32),
        jnp.minimum(total, num_lanes),
        jnp.zeros((k, p), bool),
        jnp.zeros((k, p), bool),
        jnp.zeros((k, p), bool),
    )

    def body(s: _Lanes) -> _Lanes:
        lanes = jax.vmap(_step)(jax.tree.map(lambda x: x[s.board], roots), s.loop)
        # _step moves a lane that finished its chain on to its board's next chain: hand
        # it the next chain of the queue instead, and keep what it found.
        freed = (lanes.rep != s.loop.rep) & (s.loop.rep < p)
        laddered = s.laddered.at[s.board].max(lanes.laddered & freed[:, None])
        working = s.working.at[s.board].max(lanes.working & freed[:, None])
        # _step clears a lane's ko flag when a 1-liberty search aborts on its budget.
        aborted = freed & s.loop.ko_active & ~lanes.ko_active
        rep_at = jnp.where(aborted, s.loop.rep, p)
        aborted_at = s.aborted.at[s.board, rep_at].set(True, mode="drop")
        numbers = s.taken + jnp.cumsum(freed, dtype=jnp.int32) - 1
        board, rep = hand_out(numbers)
        board = jnp.where(freed, board, s.board)
        rep = jnp.where(freed, rep, lanes.rep)
        loop = lanes._replace(
            rep=rep,
            ko_active=jnp.where(freed, ko_of(board, rep), lanes.ko_active),
            laddered=lanes.laddered & ~freed[:, None],
            working=lanes.working & ~freed[:, None],
        )
        taken = jnp.minimum(s.taken + jnp.sum(freed, dtype=jnp.int32), total)
        return _Lanes(loop, board, taken, laddered, working, aborted_at)

    return jax.lax.while_loop(lambda s: jnp.any(s.loop.rep < p), body, state)


def _scan_in_lanes(roots: _Root, num_lanes: int) -> tuple[jax.Array, jax.Array]:
    """All boards' chains shared out among ``num_lanes`` search lanes: ``(laddered [K, P],
    working [K, P])`` per chain, the same as each board's scan in order.

    The loop runs about ``total work / lanes`` iterations plus the longest single chain,
    instead of as many as the board with the most work. Searches of one board are
    independent but for one thing: a 1-liberty search that aborts on its budget leaves
    KataGo's ko point cleared for the board's later chains. So a first pass runs every
    search with the ko point; if some aborted, a second pass runs them again with the ko
    point on up to each board's first abort and off after it, which is what the board's
    own scan sees. Both passes are one loop body (compiled once).
    """
    k, p = roots.board.shape
    idx = jnp.arange(p)

    def one_pass(carry):
        ko_on, _, _, _ = carry
        done = _lanes_pass(roots, num_lanes, ko_on)
        first = jnp.min(jnp.where(done.aborted, idx, p), axis=1)  # [K]; P: none
        ko_next = idx[None, :] <= first[:, None]
        return ko_next, done.laddered, done.working, jnp.any(ko_next != ko_on)

    zeros = jnp.zeros((k, p), bool)
    start = (jnp.ones((k, p), bool), zeros, zeros, jnp.bool_(True))
    _, laddered, working, _ = jax.lax.while_loop(lambda c: c[3], one_pass, start)
    return laddered, working


# On a CPU an idle lane still costs its share of every iteration's vector work, so fewer
# lanes than boards: K/4 lanes against one lane a board, 2.4 vs 3.5 ms a 19x19
# reference position under vmap at batch 32 (K = 96 boards; 9x9 about even, 0.71 vs 0.64),
# at least 4 and at most 64 of them (the stacks' memory). Up to 4 boards (one position's three
# under lax.map) their own scans in order were faster than lanes (3.0 vs 3.4 ms). On an
# accelerator an iteration costs about the same however many lanes run: one a board.
_CPU_LANES_PER_BOARD, _CPU_MAX_LANES, _MIN_BOARDS_FOR_LANES = 0.25, 64, 5


def _num_lanes(num_boards: int) -> int:
    """Search lanes for a scan of ``num_boards`` boards; 0: each board's chains in order."""
    if jax.default_backend() != "cpu":
        return num_boards
    if num_boards < _MIN_BOARDS_FOR_LANES:
        return 0
    return min(_CPU_MAX_LANES, max(4, int(num_boards * _CPU_LANES_PER_BOARD)))


def _scan_boards_jax(boards, kos, to_play, budgets):
    """The scans of ``[K]`` boards (``boards [K, P]``, the rest ``[K]``) in one loop.

    The chains of all boards are shared out among search lanes (:func:`_scan_in_lanes`,
    :func:`_num_lanes`); a few boards on a CPU are scanned chain after chain instead
    (:func:`_scan_in_order`).
    Written over an explicit board axis rather than left to ``vmap``: batching a
    ``while_loop`` whose condition differs per board makes every iteration select
    between the old and new loop state of every board, whole [D, P] stacks included
    (about 1.2 MB a board on 19x19), which cost more than the search itself. Under
    ``vmap`` (any depth of it) the boards of the whole batch are flattened into one
    such loop, see ``gojax._native.batched_calls``.
    """
    roots = jax.vmap(_root)(boards, kos, to_play, budgets)
    lanes = _num_lanes(boards.shape[0])
    if lanes == 0:
        return jax.vmap(_planes)(roots, *_scan_in_order(roots))
    return jax.vmap(_planes)(roots, *_scan_in_lanes(roots, lanes))
