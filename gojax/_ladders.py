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

The code: the search in ``gojax._ladder_search`` (one board's loop step), the schedule
of the JAX loop over many boards in ``gojax._ladder_lanes``; this module holds the
native kernel's calls (FFI and host callback, the host's threads), the choice between
them and the loop at each trace, and the features' entry points.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np

from gojax._ladder_lanes import _lanes_pass as _lanes_pass
from gojax._ladder_lanes import _scan_boards_jax
from gojax._ladder_lanes import _scan_in_lanes as _scan_in_lanes
from gojax._ladder_lanes import _scan_in_order as _scan_in_order
from gojax._ladder_search import LADDER_SEARCH_BUDGET
from gojax._ladder_search import _root as _root
from gojax._ladder_search import stack_limit as stack_limit
from gojax._native import Kernel, batched_calls

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


# One batched scan for each way of scanning (``_scan_boards`` picks): each keeps its own
# traces, whatever JAX caches of them.
_SCANS = {
    "native": batched_calls(_scan_boards_anywhere),
    "host": batched_calls(_scan_boards_host),
    "loop": batched_calls(_scan_boards_jax),
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
