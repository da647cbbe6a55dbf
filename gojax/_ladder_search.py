"""One ladder search lane in JAX: the position a search plays on (stones, chain labels,
liberties, ko point, updated move by move without a flood fill), KataGo's node
evaluation (``searchIsLadderCaptured`` and its two-liberty attacker-first form), and one
step of the scan-and-search loop of one board (pop a resolved node, play a move and
evaluate the child, or start the next chain's search).

Separate from the scheduling of the loop over many boards (``gojax._ladder_lanes``) and
from the native kernel and its dispatch (``gojax._ladders``, whose module docstring
describes the search, the move order and the cost): this is the literal port of
KataGo's iterative DFS.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gojax._board import (
    _distinct,
    _label_chains,
    _liberties_after_move,
    _liberties_at,
    neighbor_table,
)

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
