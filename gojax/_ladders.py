"""KataGo's ladder input features (input version 7, planes 14 and 17) on one board.

:func:`ladder_features` ports KataGo's ``iterLadders`` (``nninputs.cpp``) and
the two searches it calls, ``searchIsLadderCaptured`` and
``searchIsLadderCapturedAttackerFirst2Libs`` (``board.cpp``), as one pure,
jittable and vmappable JAX function. Planes 15 and 16 are the same scan on the
boards one and two moves ago: call it on those boards (with their ko points).

Scan. Chains with 1 or 2 liberties are visited in the order of their lowest
point index, which is KataGo's y-major scan (row 0 on top) meeting each chain
first at that point; each chain is solved once and the answer is cached for
all its stones. A 1-liberty chain is one defender-first search. A 2-liberty
chain is one defender-first search after each attacker move on one of its
liberties (only if legal: simple ko on, multi-stone suicide illegal); the
liberties where that search captures are the "working moves".

Search (a literal port of KataGo's iterative DFS; ``d`` is the stack depth,
the defender moves at even depths):

* defender node: escapes if its chain has >= 2 liberties or any simple-ko
  point is set; the candidates are the liberties of adjacent attacker chains
  in atari, then its own liberty unless it is already listed; it escapes at
  once if ``getBoundNumLibertiesAfterPlay`` at the *last* candidate gives a
  lower bound >= 3, and is captured at once if that is the only candidate and
  its upper bound is <= 1;
* attacker node: captured if the chain has <= 1 liberty, escaped if >= 3;
  the double-ko rule; the early outs for non-adjacent liberties with >= 3
  empty neighbours; the two liberties ordered by ``2 * empty neighbours +
  sum(2 * libs - 3)`` over neighbouring defender stones with > 1 liberty,
  swapped only on a strict win of the second;
* an illegal candidate is a failure for its player; a node at depth
  ``size * size * 3 // 2`` counts as captured (KataGo's stack limit, kept
  unchanged: it is a few hundred plies, never reached by real ladders, and
  the stack costs little memory); the 25,000th move played in one search
  aborts it with "not captured".

Move order. Without the node budget the answer of each search does not depend
on the order in which candidates are tried (it is an AND/OR tree whose children
are sets), so only budget aborts can see it. KataGo's order comes from its
chain linked lists, which depend on the game's history (and on earlier undos),
not on the board; this port uses a fixed order instead: a 2-liberty chain's
liberties and the attacker's two candidates (before the heuristic swap) in
ascending point index, the defender's capture points in ascending index. The
one place the order shows without a budget abort is KataGo's bound test on
the *last* defender candidate when the chain's own liberty is also a capture
point and there are several capture points: the last one is then the highest
capture point here (KataGo: the last one met on its linked-list walk).

Shared board. KataGo runs every search on one mutable board copy. Each search
undoes its moves, so later searches see the same stones (chain linked-list
order can change, but that only matters through the order above). The one
state that leaks is the simple-ko point: a 1-liberty search clears it at its
root and, when it aborts on the budget, does not restore it; later 2-liberty
searches may then play the attacker's first move on the ko point. This port
keeps that flag (see "Design and cost" for how lanes keep it exact).

Native version. Where a C++ compiler is found the scans run as native code
instead (``_ladders.cc``, compiled on first use, see ``gojax._native``): each
board's scan in order, each search a depth-first walk that copies the position
per ply. On a CPU it is an XLA FFI call, the boards of a call shared out over
XLA's intra-op threads; on accelerators a host callback (:func:`scan_on_host`),
the boards shared out over the host's cores: a GPU runs the loop below as one
round of kernel launches and a host round trip per step, and on an H100 the
features of 256 19x19 positions took 108 ms that way (BENCHMARKS.md). It is the
same function, bit for bit (budget aborts and the leaked ko point included),
50-200x cheaper than the loop below on a CPU; the loop still runs with
``GOJAX_NATIVE_LADDERS=0`` or without a C++ compiler, and
``GOJAX_NATIVE_LADDERS=host`` makes every platform take the host callback (how
the accelerators' path is checked on a CPU).

Design and cost. One ``lax.while_loop`` step pops one resolved node, or plays
one move and evaluates the child (leaves are resolved in the same step), so a
chain costs about as many steps as moves played plus pops. The boards of a
call (the three of ``katago_inputs``, a ``vmap``'s batch, nested ``vmap``s
flattened) share one loop: their chains are handed out, board after board and
in scan order, to search lanes, and a lane that finishes a chain takes the next
one from any board. The loop thus runs about ``total steps / lanes`` plus the
longest chain, where one loop per board (as before) ran as long as the board
with the most work (on the reference positions the busiest board had 3-5x the
mean). The searches of a board are independent but for the ko point a budget
abort leaks (see above): a second pass over the same loop body, run only when
some 1-liberty search aborted, keeps each board's answers those of its own
scan in order. On accelerators there is one lane a board; on CPUs a quarter
as many (an idle lane still costs vector work), and a call with up to four
boards scans each board's chains in order, one lane a board. Each lane
keeps a snapshot of its position (stones, chain labels, per-stone liberty
counts, ko point) and its candidate list (a point mask plus one explicit last
candidate) per search node, in a stack of ``D = size*size*3//2`` entries: about
``6 * D * size * size`` bytes, 1.2 MB per lane on 19x19. Chains are labelled
incrementally (a move relabels what it joins and removes what it captures) and
liberties are updated around the move as ``gojax._board.play`` does (a full
recount, one scatter-add, only after a capture), so a step is a fixed number of
O(P) vector operations with no flood fill.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import math
import os
import threading
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gojax._board import (
    _distinct,
    _label_chains,
    _liberties_after_move,
    _liberties_at,
    neighbor_table,
)
from gojax._native import Kernel

LADDER_SEARCH_BUDGET = 25_000  # KataGo's MAX_LADDER_SEARCH_NODE_BUDGET (moves per search)
_OFF = 2  # colour read beyond the edge


def stack_limit(size: int) -> int:
    """Depth at which KataGo's ladder search gives up and counts the chain as captured."""
    stack_size = size * size * 3 // 2 + 1
    return stack_size - 1


# ----------------------------------------------------------------------------
# Neighbourhood helpers on flat [P] arrays.


def _neighbours(x: jax.Array, fill, size: int) -> tuple[jax.Array, ...]:
    """``[P]`` → four ``[P]`` arrays: the value at each point's up, down, left, right neighbour."""
    grid = jnp.pad(x.reshape(size, size), 1, constant_values=fill)
    return tuple(
        part.reshape(-1)
        for part in (grid[:-2, 1:-1], grid[2:, 1:-1], grid[1:-1, :-2], grid[1:-1, 2:])
    )


def _dilate(mask: jax.Array, size: int) -> jax.Array:
    """``[P]`` bool → ``[P]`` bool: points with a 4-neighbour in ``mask``."""
    up, down, left, right = _neighbours(mask, False, size)
    return up | down | left | right


def _legal(board, libs, colour, ko, size: int) -> jax.Array:
    """``[P]`` bool: KataGo's ``isLegal`` with multi-stone suicide illegal, for ``colour``.

    Empty, not the ko point, and not a suicide: an empty neighbour, a friendly
    neighbour chain with > 1 liberty, or an enemy neighbour chain in atari.
    """
    p = size * size
    saved = jnp.zeros(p, bool)
    for c, n in zip(_neighbours(board, _OFF, size), _neighbours(libs, 0, size), strict=True):
        saved = saved | (c == 0) | ((c == colour) & (n > 1)) | ((c == -colour) & (n == 1))
    return (board == 0) & saved & (jnp.arange(p) != ko)


class _Position(NamedTuple):
    """One search position: stones, chain labels, per-stone liberty counts, ko point."""

    board: jax.Array  # [P] int8
    chain: jax.Array  # [P] int16: a point of the stone's chain; P on empty points
    libs: jax.Array  # [P] int16: liberties of the stone's chain; 0 on empty points
    ko: jax.Array  # [] int32: simple-ko point, -1 if none


def _at(x: jax.Array, points: jax.Array, fill) -> jax.Array:
    """``x[points]`` with ``fill`` where a point is ``P`` (off the board)."""
    return jnp.append(x, jnp.asarray(fill, x.dtype))[points]


def _play(pos: _Position, move: jax.Array, colour: jax.Array, size: int) -> _Position:
    """KataGo's ``playMoveAssumeLegal`` for a legal, non-suicidal ``move`` of ``colour``.

    Captures enemy neighbour chains left without liberties, joins friendly
    ones, and sets the ko point when exactly one stone is captured by a lone
    stone left with one liberty.
    """
    p = size * size
    nbrs = jnp.asarray(neighbor_table(size))[move]  # [4]
    nb_colour = _at(pos.board, nbrs, _OFF)
    nb_chain = _at(pos.chain, nbrs, p).astype(jnp.int32)
    nb_libs = _at(pos.libs, nbrs, 0)
    captures = jnp.where((nb_colour == -colour) & (nb_libs == 1), nb_chain, -1)
    joins = jnp.where(nb_colour == colour, nb_chain, -1)
    chain = pos.chain.astype(jnp.int32)
    captured = jnp.any(chain[:, None] == captures[None, :], axis=1)
    here = jnp.arange(p) == move
    joined = jnp.any(chain[:, None] == joins[None, :], axis=1) | here
    board = jnp.where(captured, 0, pos.board)
    board = jnp.where(here, colour, board).astype(jnp.int8)
    chain = jnp.where(joined, move, chain)
    chain = jnp.where(board == 0, p, chain).astype(jnp.int16)
    # Liberties change only around the move unless it captured (gojax._board's update).
    first = jnp.stack(_distinct(*[nb_chain[k] for k in range(4)]))
    shortened = jnp.where((nb_colour == -colour) & first, nb_chain, -1).astype(jnp.int16)
    libs = _liberties_after_move(
        pos.libs, board, chain, move.astype(jnp.int32), shortened, jnp.any(captured)
    )
    lone = ~jnp.any(nb_colour == colour)
    ko = jnp.where(
        (jnp.sum(captured) == 1) & lone & (libs[move] == 1),
        jnp.argmax(captured),
        -1,
    ).astype(jnp.int32)
    return _Position(board, chain, libs, ko)


def _chain_sizes(pos: _Position, points: jax.Array) -> jax.Array:
    """``[K]`` int32: number of stones in the chain at each of ``points`` (garbage if empty)."""
    p = pos.board.shape[0]
    labels = _at(pos.chain, points, p)
    return jnp.sum(pos.chain[None, :] == labels[:, None], axis=1, dtype=jnp.int32)


class _Node(NamedTuple):
    """What evaluating a search node gives: a resolved value, or its candidate list."""

    leaf: jax.Array  # [] bool: resolved without playing a move
    value: jax.Array  # [] bool: the resolved value (True = ladder captured)
    mask: jax.Array  # [P] bool: candidates tried first, in ascending point order
    tail: jax.Array  # [] int32: candidate tried after the mask, -1 if none


def _evaluate(
    pos: _Position,
    loc: jax.Array,
    defender: jax.Array,
    depth: jax.Array,
    size: int,
) -> _Node:
    """Enter a search node: KataGo's base cases and move generation at ``depth``.

    ``loc`` is a stone of the defender's chain (which the search never
    captures); the defender is to move at even depths.
    """
    p = size * size
    idx = jnp.arange(p)
    table = jnp.asarray(neighbor_table(size))
    attacker = -defender
    board, chain, libs = pos.board, pos.chain, pos.libs
    empty = board == 0
    num_libs = libs[loc].astype(jnp.int32)
    own = chain == chain[loc]
    around = _dilate(own, size) & ~own
    own_libs = around & empty
    lowest = jnp.argmax(own_libs)
    highest = p - 1 - jnp.argmax(own_libs[::-1])

    def neighbourhood(point):
        nbrs = table[point]
        colour = _at(board, nbrs, _OFF)
        lib = _at(libs, nbrs, 0).astype(jnp.int32)
        return nbrs, colour, lib

    # ---- Defender: capture points (liberties of adjacent attacker chains in
    # atari), then its own liberty unless that is one of them.
    touching = around & (board == attacker) & (libs == 1)
    marks = jnp.zeros(p + 1, bool).at[jnp.where(touching, chain, p)].set(True)
    in_atari = marks.at[p].set(False)[chain] & (board == attacker)
    captures = empty & _dilate(in_atari, size)
    own_lib = lowest  # the only one when the defender is to move
    def_tail = jnp.where(captures[own_lib], -1, own_lib)
    last = jnp.where(def_tail >= 0, def_tail, p - 1 - jnp.argmax(captures[::-1]))
    num_moves = jnp.sum(captures, dtype=jnp.int32) + (def_tail >= 0)
    # getBoundNumLibertiesAfterPlay(last, defender): per neighbour, no deduplication.
    nbrs, colour, lib = neighbourhood(last)
    immediate = jnp.sum(colour == 0)
    capturable = (colour == attacker) & (lib == 1)
    connection = jnp.where(colour == defender, lib - 1, 0)
    lower = jnp.sum(capturable) + jnp.maximum(jnp.max(connection), immediate)
    upper = (
        immediate + jnp.sum(jnp.where(capturable, _chain_sizes(pos, nbrs), 0)) + jnp.sum(connection)
    )
    def_escapes = (num_libs >= 2) | (pos.ko >= 0) | (lower >= 3)
    def_captured = ~def_escapes & (num_moves == 1) & (upper <= 1)

    # ---- Attacker: the chain's two liberties.
    empties = sum(n == 0 for n in _neighbours(board, _OFF, size))  # [P] empty neighbours
    imm_a, imm_b = empties[lowest], empties[highest]

    def ko_mouth(point):
        # wouldBeKoCapture(point, attacker): only defender stones or the edge
        # around, exactly one neighbour in atari, and that chain a lone stone.
        nbrs, colour, lib = neighbourhood(point)
        in_atari = (colour == defender) & (lib == 1)
        single = _chain_sizes(pos, nbrs[jnp.argmax(in_atari)][None])[0] == 1
        return jnp.all((colour == defender) | (colour == _OFF)) & (jnp.sum(in_atari) == 1) & single

    def libs_after(point):
        # getNumLibertiesAfterPlay(point, defender, 3) <= 2: the exact count of
        # distinct liberties of the stone's chain after the move (captures made).
        nbrs, colour, lib = neighbourhood(point)
        labels = _at(chain, nbrs, p)
        taken = jnp.where((colour == attacker) & (lib == 1), labels, -1)
        joined = jnp.where(colour == defender, labels, -1)
        freed = empty | (jnp.any(chain[:, None] == taken[None, :], axis=1) & (board == attacker))
        grown = (idx == point) | (
            jnp.any(chain[:, None] == joined[None, :], axis=1) & (board == defender)
        )
        return jnp.sum(_dilate(grown, size) & freed & (idx != point))

    def connection_score(point):
        # countHeuristicConnectionLibertiesX2(point, defender)
        _, colour, lib = neighbourhood(point)
        return jnp.sum(jnp.where((colour == defender) & (lib > 1), 2 * lib - 3, 0))

    # Both liberties at once: one vectorised pass over the pair instead of two.
    pair = jnp.stack([lowest, highest])
    mouths = jax.vmap(ko_mouth)(pair)
    afters = jax.vmap(libs_after)(pair)
    scores = jax.vmap(connection_score)(pair)
    double_ko = (imm_a == 0) & (imm_b == 0) & jnp.all(mouths) & jnp.all(afters <= 2)
    double_ko = double_ko & ~jnp.any(touching)
    gap = jnp.abs(highest - lowest)
    adjacent = (gap == size) | ((gap == 1) & (lowest // size == highest // size))
    far_a = ~adjacent & (imm_a >= 3)
    far_b = ~adjacent & (imm_b >= 3)
    score_a = 2 * imm_a + scores[0]
    score_b = 2 * imm_b + scores[1]
    swap = score_b > score_a
    att_first = jnp.where(
        far_a, lowest, jnp.where(far_b, highest, jnp.where(swap, highest, lowest))
    )
    att_second = jnp.where(far_a | far_b, -1, jnp.where(swap, lowest, highest))
    att_leaf = (num_libs != 2) | double_ko | (far_a & far_b)
    att_value = (num_libs <= 1) | ((num_libs == 2) & double_ko)

    is_defender = depth % 2 == 0
    at_limit = depth >= stack_limit(size)
    leaf = at_limit | jnp.where(is_defender, def_escapes | def_captured, att_leaf)
    value = at_limit | jnp.where(is_defender, def_captured, att_value)
    mask = jnp.where(is_defender, captures, idx == att_first)
    tail = jnp.where(is_defender, def_tail, att_second).astype(jnp.int32)
    return _Node(leaf, value, mask, tail)


class _Loop(NamedTuple):
    """The scan-and-search state of one board (``D`` stack entries, ``P`` points)."""

    rep: jax.Array  # [] int32: lowest point of the chain being solved; P when done
    sub: jax.Array  # [] int32: for a 2-liberty chain, which liberty the attacker tries
    start: jax.Array  # [] bool: the next iteration starts search (rep, sub)
    depth: jax.Array  # [] int32: current node
    done: jax.Array  # [] bool: the current node is resolved, with `value`
    value: jax.Array  # [] bool
    count: jax.Array  # [] int32: moves played in this search
    ko_active: jax.Array  # [] bool: the shared board still has the caller's ko point
    boards: jax.Array  # [D, P] int8: position of each node on the stack
    chains: jax.Array  # [D, P] int16
    libs: jax.Array  # [D, P] int16
    kos: jax.Array  # [D] int32
    masks: jax.Array  # [D, P] bool: candidate lists (mask part)
    tails: jax.Array  # [D] int32: candidate lists (last candidate)
    cursors: jax.Array  # [D] int32: last mask candidate tried, -1 before the first
    in_tail: jax.Array  # [D] bool: the last candidate has been tried
    laddered: jax.Array  # [P] bool: result per chain, at its lowest point
    working: jax.Array  # [P] bool: working first moves against opponent chains


class _Root(NamedTuple):
    """What one board's scan reads throughout: the scanned position and its chains."""

    board: jax.Array  # [P] int8
    label: jax.Array  # [P] int16: chain labels (the chain's lowest point; P on empty points)
    libs: jax.Array  # [P] int16: liberties of each stone's chain, 0 on empty points
    ko: jax.Array  # [] int32: simple-ko point, -1 if none
    to_play: jax.Array  # [] int8
    scanned: jax.Array  # [P] bool: lowest point of each chain with 1 or 2 liberties
    budget: jax.Array  # [] int32: moves per search before it gives up
    # Per search, looked up instead of recomputed every loop iteration:
    first_libs: jax.Array  # [P, 2] int32: lowest, highest liberty of the chain labelled here
    next_reps: jax.Array  # [P + 1] int32: at i + 1, the first scanned point after i (P: none)

    @property
    def size(self) -> int:
        return math.isqrt(self.board.shape[-1])


def _root(board, ko, to_play, budget) -> _Root:
    size = math.isqrt(board.shape[-1])
    p = size * size
    idx = jnp.arange(p, dtype=jnp.int32)
    board = jnp.asarray(board, jnp.int8)
    label = _label_chains(board, size)
    libs = _liberties_at(board, label, size)
    counts = libs.astype(jnp.int32)
    scanned = (board != 0) & ((counts == 1) | (counts == 2)) & (label == idx)
    # Each empty point is a liberty of the chains next to it: the lowest and highest
    # per chain label (slot P collects what is not a stone's neighbour).
    nbrs = jnp.asarray(neighbor_table(size))  # [P, 4], P off the board
    nb_label = _at(label, nbrs, p).astype(jnp.int32)
    owners = jnp.where((board == 0)[:, None], nb_label, p).reshape(-1)
    points = jnp.repeat(idx, 4)
    lowest = jnp.full(p + 1, p, jnp.int32).at[owners].min(points)[:p]
    highest = jnp.full(p + 1, -1, jnp.int32).at[owners].max(points)[:p]
    later = jnp.where(scanned, idx, p)
    next_reps = jnp.append(jax.lax.cummin(later, reverse=True), p)  # at i: first scanned >= i
    return _Root(
        board,
        label,
        libs,
        jnp.asarray(ko, jnp.int32),
        jnp.asarray(to_play, jnp.int8),
        scanned,
        jnp.asarray(budget, jnp.int32),
        jnp.stack([lowest, highest], axis=-1),
        next_reps.astype(jnp.int32),
    )


def _next_rep(root: _Root, after: jax.Array) -> jax.Array:
    """The next chain to solve after point ``after``: its lowest point, or P when none is left."""
    return root.next_reps[jnp.clip(after + 1, 0, root.board.shape[-1])]


def _init(root: _Root) -> _Loop:
    p = root.board.shape[-1]
    d = stack_limit(root.size)
    return _Loop(
        rep=_next_rep(root, jnp.int32(-1)),
        sub=jnp.int32(0),
        start=jnp.bool_(True),
        depth=jnp.int32(0),
        done=jnp.bool_(False),
        value=jnp.bool_(False),
        count=jnp.int32(0),
        ko_active=jnp.bool_(True),
        boards=jnp.zeros((d, p), jnp.int8),
        chains=jnp.zeros((d, p), jnp.int16),
        libs=jnp.zeros((d, p), jnp.int16),
        kos=jnp.full(d, -1, jnp.int32),
        masks=jnp.zeros((d, p), bool),
        tails=jnp.full(d, -1, jnp.int32),
        cursors=jnp.full(d, -1, jnp.int32),
        in_tail=jnp.zeros(d, bool),
        laddered=jnp.zeros(p, bool),
        working=jnp.zeros(p, bool),
    )


def _step(root: _Root, s: _Loop) -> _Loop:
    """One iteration of the scan-and-search loop of one board: pop a resolved node, or
    play one move and evaluate the child, or start the next search. A board whose scan
    is over (``rep == P``) is left as it is, so a batch can step until its last board
    is done."""
    size = root.size
    p = size * size
    depth_cap = stack_limit(size)  # nodes at depth >= this are leaves: never stored
    idx = jnp.arange(p)
    active = s.rep < p
    loc = jnp.minimum(s.rep, p - 1)
    defender = root.board[loc]
    attacker = -defender
    two_libs = root.libs[loc] == 2
    # A 2-liberty chain's searches start on its lower, then its higher liberty.
    first_move = jnp.where(two_libs, root.first_libs[loc, jnp.minimum(s.sub, 1)], p)

    # 1. Pop a resolved node into its parent (a cutoff resolves the parent too).
    popping = ~s.start & s.done
    finished = popping & (s.depth == 0)
    up = popping & (s.depth > 0)
    depth = jnp.where(up, s.depth - 1, s.depth)
    is_defender = depth % 2 == 0
    done = jnp.where(up, jnp.where(is_defender, ~s.value, s.value), s.done)
    expanding = ~s.start & ~done

    # 2. The position to move from: the stacked node, or the scanned board
    # (with the ko point unless an aborted search cleared it) for a new search.
    slot = jnp.clip(depth, 0, depth_cap - 1)
    base = _Position(
        jnp.where(s.start, root.board, s.boards[slot]),
        jnp.where(s.start, root.label, s.chains[slot]),
        jnp.where(s.start, root.libs, s.libs[slot]),
        jnp.where(s.start, jnp.where(s.ko_active, root.ko, -1), s.kos[slot]),
    )
    mover = jnp.where(s.start | ~is_defender, attacker, defender)
    legal = _legal(base.board, base.libs, mover, base.ko, size)
    cursor, in_tail, tail = s.cursors[slot], s.in_tail[slot], s.tails[slot]
    listed = s.masks[slot] & legal & (idx > cursor) & ~in_tail
    from_mask = jnp.any(listed)
    tail_ok = ~in_tail & (tail >= 0) & legal[jnp.clip(tail, 0, p - 1)]
    picked = jnp.where(from_mask, jnp.argmax(listed), jnp.where(tail_ok, tail, -1))
    exhausted = expanding & (picked < 0)
    first_ok = (first_move == p) | legal[jnp.minimum(first_move, p - 1)]
    move = jnp.where(s.start, first_move, picked)
    plays = jnp.where(s.start, first_ok & (first_move < p), expanding & ~exhausted)
    played = _play(base, jnp.clip(move, 0, p - 1), mover, size)
    child = jax.tree.map(lambda new, old: jnp.where(plays, new, old), played, base)
    # KataGo clears the ko point at the root of every defender-first search.
    child = child._replace(ko=jnp.where(s.start, -1, child.ko))
    moved = expanding & ~exhausted
    count = jnp.where(s.start, 0, s.count + moved)
    child_depth = jnp.where(s.start, 0, depth + 1)
    node = _evaluate(child, loc, defender, child_depth, size)
    aborted = moved & (count >= root.budget)

    # 3. Outcomes: push the child, resolve the current node, or end the search.
    moved = moved & ~aborted
    push = (s.start & first_ok & ~node.leaf) | (moved & ~node.leaf)
    back = moved & node.leaf
    ended = finished | (s.start & (~first_ok | node.leaf)) | aborted
    result = jnp.where(finished, s.value, s.start & first_ok & node.leaf & node.value)
    new_done = jnp.where(
        push,
        False,
        jnp.where(back, jnp.where(is_defender, ~node.value, node.value), done | exhausted),
    )
    new_value = jnp.where(back, node.value, jnp.where(exhausted, is_defender, s.value))

    cursors = s.cursors.at[slot].set(jnp.where(moved & from_mask, picked, cursor))
    in_tails = s.in_tail.at[slot].set(in_tail | (moved & ~from_mask))
    at = jnp.where(push & active, child_depth, depth_cap)  # out of range: dropped
    # The [D, P] stacks change in one row (none when `at` is out of range); the rest is
    # small enough to keep or replace whole.
    stacks = dict(
        boards=s.boards.at[at].set(child.board, mode="drop"),
        chains=s.chains.at[at].set(child.chain, mode="drop"),
        libs=s.libs.at[at].set(child.libs, mode="drop"),
        kos=s.kos.at[at].set(child.ko, mode="drop"),
        masks=s.masks.at[at].set(node.mask, mode="drop"),
        tails=s.tails.at[at].set(node.tail, mode="drop"),
    )

    # Record a finished search and move on to the next one.
    laddered = s.laddered.at[loc].set(
        jnp.where(ended, jnp.where(two_libs, s.laddered[loc] | result, result), s.laddered[loc])
    )
    working_hit = ended & two_libs & result & (defender == -root.to_play)
    hit_at = jnp.minimum(first_move, p - 1)
    working = s.working.at[hit_at].set(s.working[hit_at] | working_hit)
    second = two_libs & (s.sub == 0)
    small = dict(
        rep=jnp.where(ended & ~second, _next_rep(root, s.rep), s.rep),
        sub=jnp.where(ended, second.astype(jnp.int32), s.sub),
        start=ended,
        depth=jnp.where(push, child_depth, depth),
        done=new_done,
        value=new_value,
        count=count,
        # A budget abort of a 1-liberty search leaves KataGo's ko point cleared.
        ko_active=s.ko_active & ~(aborted & ~two_libs),
        laddered=laddered,
        working=working,
    )
    small.update(
        cursors=cursors.at[at].set(-1, mode="drop"), in_tail=in_tails.at[at].set(False, mode="drop")
    )
    # A finished board (in a batch that is still working) keeps its state.
    small = {k: jnp.where(active, v, getattr(s, k)) for k, v in small.items()}
    return _Loop(**small, **stacks)


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


# The same scans as native code (``_ladders.cc``): on CPUs as an XLA FFI call, on accelerators
# on their host through a callback. One board after another, each search a depth-first walk,
# the boards of a call shared out over XLA's threads (CPU) or the host's (callback). It gives
# the JAX loop's answers bit for bit, budget aborts and the ko point they leave included.
_NATIVE_TARGET = "gojax_ladders"
_NATIVE = Kernel(
    "_ladders.cc",
    prefix="ladders",
    targets={_NATIVE_TARGET: "GojaxLadders"},
    title="the native ladder search",
    fallback="native ladder search off, the JAX loop used instead",
    switch="GOJAX_NATIVE_LADDERS",
)
# Board points a host thread scans per call at least: fewer do not pay for handing them over.
_HOST_POINTS_PER_THREAD = 8 * 361


def _usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the platform tells)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


_HOST_THREADS = _usable_cores()
_host_pool: concurrent.futures.ThreadPoolExecutor | None = None
_host_pool_lock = threading.Lock()


def _forget_host_threads() -> None:
    """In a forked child: the parent's pool threads do not exist there, so start anew."""
    global _host_pool, _host_pool_lock
    _host_pool, _host_pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_host_threads)


def native_available() -> bool:
    """Whether the scans take the native kernel (compiled on first use; ``gojax._native``):
    as an FFI call on CPUs, through a host callback on accelerators.

    Off with ``GOJAX_NATIVE_LADDERS=0`` and without a C++ compiler on the host; the JAX
    loop then runs on every platform.
    """
    return _NATIVE.available()


def _scan_boards_native(boards, kos, to_play, budgets):
    """:func:`_scan_boards` by the native kernel: ``(laddered [K, P], working [K, P])``."""
    out = jax.ShapeDtypeStruct(boards.shape, jnp.bool_)
    return jax.ffi.ffi_call(_NATIVE_TARGET, (out, out))(
        boards.astype(jnp.int8),
        kos.astype(jnp.int32),
        to_play.astype(jnp.int8),
        budgets.astype(jnp.int32),
    )


def scan_on_host(boards, kos, to_play, budgets) -> tuple[np.ndarray, np.ndarray]:
    """The native scans of NumPy arrays on this host (``boards [K, P]``, the rest ``[K]``):
    ``(laddered [K, P], working [K, P])`` bool, as :func:`_scan_boards`.

    The boards are shared out among a pool of the host's threads (the C function releases
    the GIL), at least ``_HOST_POINTS_PER_THREAD`` points to a thread. Raises RuntimeError
    where the native kernel is unavailable (:func:`native_available`).
    """
    library = _NATIVE.library()
    if library is None:
        raise RuntimeError("the native ladder search is unavailable on this host")
    boards = np.ascontiguousarray(boards, np.int8)
    kos, budgets = (np.ascontiguousarray(x, np.int32) for x in (kos, budgets))
    to_play = np.ascontiguousarray(to_play, np.int8)
    k, p = boards.shape
    laddered = np.zeros((k, p), np.bool_)
    working = np.zeros((k, p), np.bool_)

    def scan(lo: int, hi: int) -> None:
        address = lambda a, row: ctypes.c_void_p(a.ctypes.data + row * a.strides[0])
        status = library.GojaxLaddersOnHost(
            address(boards, lo), address(kos, lo), address(to_play, lo), address(budgets, lo),
            ctypes.c_int64(hi - lo), ctypes.c_int64(p),
            address(laddered, lo), address(working, lo),
        )  # fmt: skip
        if status != 0:
            raise ValueError(f"ladders: {p} points is not a board of size 2..25")

    parts = max(1, min(_HOST_THREADS, k * p // _HOST_POINTS_PER_THREAD, k))
    bounds = [k * i // parts for i in range(parts + 1)]
    if parts == 1:
        scan(0, k)
    else:
        pool = _host_threads()
        for done in [pool.submit(scan, lo, hi) for lo, hi in itertools.pairwise(bounds)]:
            done.result()
    return laddered, working


def _host_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The host threads :func:`scan_on_host` shares boards among (one per core it may use)."""
    global _host_pool
    with _host_pool_lock:
        if _host_pool is None:
            _host_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=_HOST_THREADS, thread_name_prefix="gojax-ladders"
            )
        return _host_pool


def _scan_boards_host(boards, kos, to_play, budgets):
    """:func:`_scan_boards` by the native kernel on the host, from any platform's program
    (a callback: the boards go to the host and the planes come back, a few KB a board)."""
    out = jax.ShapeDtypeStruct(boards.shape, jnp.bool_)
    return jax.pure_callback(
        scan_on_host,
        (out, out),
        boards.astype(jnp.int8),
        kos.astype(jnp.int32),
        to_play.astype(jnp.int8),
        budgets.astype(jnp.int32),
    )


def _scan_boards(boards, kos, to_play, budgets):
    """The ladder planes of ``[K]`` boards (``boards [K, P]``, the rest ``[K]``):
    ``(laddered [K, P], working [K, P])``, as :func:`ladder_features` of each.

    By the native kernel where it is available (:func:`native_available`): an FFI call on
    a CPU, a host callback elsewhere (see the module docstring), chosen when XLA lowers
    the program, so one traced function serves every platform; with
    ``GOJAX_NATIVE_LADDERS=host`` the host callback on every platform (what accelerators
    run, for checking it on a CPU). Else by :func:`_scan_boards_jax`.

    The choice is made here, at each trace, outside the batched scans: JAX may cache what
    a ``custom_vmap`` rule traced (jax 0.11 does), so a choice made inside one would
    stay the first one made.
    """
    if not (native_available() and 2 * 2 <= boards.shape[-1] <= 25 * 25):  # the kernel's sizes
        return _SCANS["loop"](boards, kos, to_play, budgets)
    host = os.environ.get(_NATIVE.switch) == "host"
    return _SCANS["host" if host else "native"](boards, kos, to_play, budgets)


def _scan_boards_anywhere(boards, kos, to_play, budgets):
    """The native scans: an FFI call on a CPU, a host callback on other platforms."""
    return jax.lax.platform_dependent(
        boards, kos, to_play, budgets, cpu=_scan_boards_native, default=_scan_boards_host
    )


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
    such loop, see :func:`_batched_scans`.
    """
    roots = jax.vmap(_root)(boards, kos, to_play, budgets)
    lanes = _num_lanes(boards.shape[0])
    if lanes == 0:
        return jax.vmap(_planes)(roots, *_scan_in_order(roots))
    return jax.vmap(_planes)(roots, *_scan_in_lanes(roots, lanes))


def _batched_scans(scan: Callable) -> Callable:
    """``scan`` of ``[K]`` boards as a function whose ``vmap`` (any depth of it) runs one
    ``scan`` of all the batch's boards: the ``[B, K]`` boards flattened to ``B*K``."""

    @jax.custom_batching.custom_vmap
    def scan_boards(boards, kos, to_play, budgets):
        return scan(boards, kos, to_play, budgets)

    @scan_boards.def_vmap
    def batched(axis_size, in_batched, boards, kos, to_play, budgets):
        args = [
            x if is_batched else jnp.broadcast_to(x, (axis_size,) + x.shape)
            for x, is_batched in zip((boards, kos, to_play, budgets), in_batched, strict=True)
        ]
        k = boards.shape[-2]
        flat = [x.reshape((axis_size * k,) + x.shape[2:]) for x in args]
        laddered, working = scan_boards(*flat)  # itself again: an outer vmap flattens too
        p = boards.shape[-1]
        return (laddered.reshape(axis_size, k, p), working.reshape(axis_size, k, p)), (True, True)

    return scan_boards


# One batched scan for each way of scanning (``_scan_boards`` picks): each keeps its own
# traces, whatever JAX caches of them.
_SCANS = {
    "native": _batched_scans(_scan_boards_anywhere),
    "host": _batched_scans(_scan_boards_host),
    "loop": _batched_scans(_scan_boards_jax),
}


def _ladder_features(
    board: jax.Array, ko: jax.Array, to_play: jax.Array, budget: jax.Array | int
) -> tuple[jax.Array, jax.Array]:
    """:func:`ladder_features` with the node budget as an argument (may be traced; tests use
    small budgets to exercise aborts)."""
    one = lambda x, dtype: jnp.asarray(x, dtype)[None]
    laddered, working = _scan_boards(
        one(board, jnp.int8), one(ko, jnp.int32), one(to_play, jnp.int8), one(budget, jnp.int32)
    )
    return laddered[0], working[0]


def ladder_features(
    board: jax.Array, ko: jax.Array, to_play: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """KataGo's ladder planes for one board (``P = size * size``, ``size`` from the shape).

    Args:
      board: ``[P]`` int8, +1 black, -1 white, 0 empty (row 0 on top).
      ko: ``[]`` int, the simple-ko point banned for ``to_play``, -1 if none.
      to_play: ``[]`` int8, +1 or -1: the player ``pla`` the features are for.

    Returns:
      ``(laddered, working_moves)``, both ``[P]`` bool. ``laddered`` marks the
      stones (either colour) whose chain has 1 or 2 liberties and is ladder
      captured (KataGo plane 14; planes 15/16 are this on earlier boards).
      ``working_moves`` marks, for opponent (``-to_play``) chains with exactly
      2 liberties that are laddered, the liberties where ``to_play``'s first
      move starts a working ladder (plane 17).

    Jittable and vmappable; see the module docstring for the cost.
    """
    return _ladder_features(board, ko, to_play, LADDER_SEARCH_BUDGET)


def ladder_features_of_boards(
    boards: jax.Array, kos: jax.Array, to_play: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """:func:`ladder_features` of ``K`` boards at once (``boards [K, P]``, ``kos [K]``;
    ``to_play`` one player for all): ``(laddered [K, P], working [K, P])``.

    One loop for all of them, as long as the longest scan, instead of ``K`` loops
    one after the other; the same planes as ``K`` calls of :func:`ladder_features`.
    """
    k = boards.shape[0]
    return _scan_boards(
        jnp.asarray(boards, jnp.int8),
        jnp.asarray(kos, jnp.int32),
        jnp.broadcast_to(jnp.asarray(to_play, jnp.int8), (k,)),
        jnp.full((k,), LADDER_SEARCH_BUDGET, jnp.int32),
    )
