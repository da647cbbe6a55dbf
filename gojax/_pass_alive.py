"""Benson pass-alive area and KataGo's area input planes (model input version 7, planes 18/19).

Everything is written for one board (``[P]`` int8, ``P = N * N``, +1 black,
-1 white, 0 empty, index ``row * N + col``) and batched with ``jax.vmap``.
Shapes are static and loops are ``lax.while_loop``, so both functions jit.

Semantics follow KataGo's ``Board::calculateAreaForPla`` (run for Black, then
White) and ``Board::calculateArea``; for one player ``pla``:

* *Chains* are pla's 4-connected stones. *Regions* are maximal 4-connected
  sets of points that are empty or hold the opponent's stones, and contain at
  least one empty point (a set of opponent stones with no empty point is no
  region: KataGo seeds regions from empty points only).
* A region is *vital* for a chain if the chain is adjacent to every empty
  point of the region (to every point when multi-stone suicide is legal).
* Benson's iteration: kill every chain with fewer than two vital regions that
  border no killed chain; repeat to a fixed point. Survivors are pass-alive.
* A region that borders no killed chain is marked for pla (overwriting) when
  at most one of its points is adjacent to no pla stone ("small"), or, with
  ``safe_big``, when it holds no opponent stone. Otherwise, with
  ``unsafe_big``, a region without opponent stones marks only points not yet
  marked. Nothing is marked for a player without stones.

``calculateArea`` with ``nonPassAliveStones`` then gives every still-unmarked
point its own stone's colour.

Design: one label propagation finds chains and regions together (per player a
point is either "pla stone" or "not"); the vital relation needs only four
candidate chains per region, those around its first empty point (a vital chain
must touch every empty point, so in particular that one). Everything is O(P)
memory per player; both players run side by side under ``jax.vmap``.

Native version. Where a C++ compiler is found, a CPU computes the area as native code
instead (``_pass_alive.cc``, compiled on first use, see ``gojax._native``): an XLA FFI
call for all the boards of a call (a ``vmap``'s batch flattened), shared out over XLA's
threads. The same function bit for bit (tested on random and reference boards), 2-4x
cheaper on a CPU (9x9 boards, 64 to 640 a call: 13 to 7 us a board against 28), where the
area planes were most of KataGo's features' time (9x9, 64 positions: 1.7 of 2.4 ms;
1.75 ms in all after). Other platforms, and ``GOJAX_NATIVE_AREA=0``, run the JAX version.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from gojax._board import neighbor_table
from gojax._native import Kernel, batched_calls

__all__ = ["area_ownership", "native_available", "pass_alive"]

_NATIVE_TARGET = "gojax_area"
_NATIVE = Kernel(
    "_pass_alive.cc",
    prefix="area",
    targets={_NATIVE_TARGET: "GojaxArea"},
    title="the native area kernel",
    fallback="native area off, the JAX version used instead",
    switch="GOJAX_NATIVE_AREA",
)


def native_available() -> bool:
    """Whether a CPU computes the area natively (``_pass_alive.cc``; off with
    ``GOJAX_NATIVE_AREA=0`` and without a C++ compiler)."""
    return _NATIVE.available()


def _components(same_class: jax.Array, nbrs: jax.Array, p: int) -> jax.Array:
    """``[P]`` int32: the minimum point index of each point's connected component.

    Args:
      same_class: ``[P, 4]`` bool, neighbour ``k`` of each point exists and is
        of the point's own class.
      nbrs: ``[P, 4]`` int32 neighbour table (``P`` off the board).
      p: number of points.

    Min-label propagation plus pointer jumping: a label is always the index of
    a point of the same component no larger than the point itself, so
    ``label[label]`` is a valid (smaller or equal) label too. Jumping makes a
    long snake converge in far fewer steps than its length.
    """
    idx = jnp.arange(p, dtype=jnp.int32)
    big = jnp.int32(p)

    def step(labels):
        padded = jnp.append(labels, big)
        best = jnp.min(jnp.where(same_class, padded[nbrs], big), axis=1)
        best = jnp.minimum(labels, best)
        return best[best]

    def cond(carry):
        labels, previous = carry
        return jnp.any(labels != previous)

    labels, _ = jax.lax.while_loop(cond, lambda c: (step(c[0]), c[0]), (step(idx), idx))
    return labels


def _first_distinct(values: jax.Array, fill: int) -> jax.Array:
    """``[..., 4]`` → the same with repeats of an earlier entry replaced by ``fill``.

    A chain touching a point from two sides must be listed once, or it would
    be counted twice as a candidate for the same region.
    """
    a, b, c, d = (values[..., k] for k in range(4))
    return jnp.stack(
        [
            a,
            jnp.where(b != a, b, fill),
            jnp.where((c != a) & (c != b), c, fill),
            jnp.where((d != a) & (d != b) & (d != c), d, fill),
        ],
        axis=-1,
    )


def _benson_for_player(
    board: jax.Array,
    pla: jax.Array,
    *,
    suicide_legal: bool | jax.Array,
    safe_big: bool,
    unsafe_big: bool,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One player's pass of ``calculateAreaForPla``.

    Args:
      board: ``[P]`` int8 stones.
      pla: ``[]`` int8, the player (+1 or -1).

    Returns:
      ``(alive, mark, mark_if_empty)``, each ``[P]`` bool: pla's pass-alive
      stones; region points marked for pla unconditionally; region points
      marked for pla only if nothing has marked them yet.
    """
    p = board.shape[-1]
    size = math.isqrt(p)
    nbrs = jnp.asarray(neighbor_table(size))  # [P, 4]
    idx = jnp.arange(p, dtype=jnp.int32)
    big = jnp.int32(p)

    own = board == pla
    empty = board == 0
    opp = ~own & ~empty
    own_pad = jnp.append(own, False)
    on_board = nbrs < p
    nb_own = own_pad[nbrs]  # [P, 4]
    same_class = on_board & (nb_own == own[:, None])
    labels = _components(same_class, nbrs, p)

    chain = jnp.where(own, labels, big)  # [P] chain label of pla stones, P elsewhere
    # First (minimum-index) empty point of each empty-or-opp component, P if none:
    # only components with an empty point are regions.
    # (Slot P collects the non-empty points and is reset: it must stand for "no region".)
    seed = jnp.full(p + 1, big).at[jnp.where(empty, labels, big)].min(idx).at[p].set(big)
    region = jnp.where(~own & (seed[labels] < p), labels, big)  # [P], P if in no region
    in_region = region < p

    # Vital relation. Candidates of a region: the distinct chains around its seed.
    nb_chain = _first_distinct(jnp.append(chain, big)[nbrs], p)  # [P, 4]
    nb_chain_pad = jnp.concatenate([nb_chain, jnp.full((1, 4), big)])
    cand = nb_chain_pad[seed]  # [P + 1, 4]: candidate chains per region label
    point_cand = cand[region]  # [P, 4]: candidates of each point's region
    touches = jnp.any(nb_chain[:, :, None] == point_cand[:, None, :], axis=1)  # [P, 4]
    if isinstance(suicide_legal, bool):
        relevant = in_region if suicide_legal else empty
    else:  # a rule set kept as data (gojax._rules.RUNTIME_RULES)
        relevant = jnp.where(suicide_legal, in_region, empty)
    # Per region and candidate: relevant points NOT adjacent to the candidate.
    misses = (
        jnp.zeros((p + 1, 4), jnp.int16)
        .at[region]
        .add((relevant[:, None] & ~touches).astype(jnp.int16))
    )
    vital = (cand < p) & (misses == 0)  # [P + 1, 4]
    heads = own & (chain == idx)

    def borders_killed(killed):  # [P + 1] bool per chain label → [P + 1] bool per region
        dead_stone = jnp.append(killed[chain] & own, False)
        touch = jnp.any(dead_stone[nbrs], axis=1) & in_region
        return jnp.zeros(p + 1, jnp.int8).at[region].max(touch.astype(jnp.int8)) > 0

    def kill(killed):  # chains with < 2 vital regions that border no killed chain
        counted = vital & ~borders_killed(killed)[:, None]
        count = (
            jnp.zeros(p + 1, jnp.int16)
            .at[cand.reshape(-1)]
            .add(counted.reshape(-1).astype(jnp.int16))
        )
        return jnp.append(heads & (count[:p] < 2), False)

    # Killing is monotone (a bigger killed set only removes vital regions), so
    # iterating from "none killed" reaches the same fixed point as KataGo's
    # sequential loop.
    none = jnp.zeros(p + 1, bool)
    killed, _ = jax.lax.while_loop(
        lambda c: jnp.any(c[0] != c[1]), lambda c: (kill(c[0]), c[0]), (kill(none), none)
    )
    region_dead_border = borders_killed(killed)
    alive = own & ~killed[chain]

    # Region properties: points adjacent to no pla stone (capped use: <= 1), opp stones.
    internal = in_region & ~jnp.any(nb_own, axis=1)
    num_internal = jnp.zeros(p + 1, jnp.int16).at[region].add(internal.astype(jnp.int16))
    has_opp = jnp.zeros(p + 1, jnp.int8).at[region].max(opp.astype(jnp.int8)) > 0
    any_own = jnp.any(own)
    should = any_own & ~region_dead_border & (num_internal <= 1)
    if safe_big:
        should = should | (any_own & ~region_dead_border & ~has_opp)
    if unsafe_big:
        if_empty = ~should & ~has_opp & any_own
    else:
        if_empty = jnp.zeros(p + 1, bool)
    return alive, in_region & should[region], in_region & if_empty[region]


def _calculate_area(
    board: jax.Array,
    *,
    suicide_legal: bool | jax.Array,
    safe_big: bool,
    unsafe_big: bool,
    non_pass_alive_stones: bool,
) -> jax.Array:
    """``[P]`` int8 result of KataGo's ``calculateArea`` with the given flags."""
    board = jnp.asarray(board, jnp.int8)
    if native_available() and 2 * 2 <= board.shape[-1] <= 25 * 25:  # the kernel's sizes
        flags = (safe_big, unsafe_big, non_pass_alive_stones)
        suicide = jnp.asarray(suicide_legal, jnp.int8)
        return _batched_area(flags)(board[None], suicide[None])[0]
    return _area_of_board(board, suicide_legal, safe_big, unsafe_big, non_pass_alive_stones)


def _area_of_board(board, suicide_legal, safe_big, unsafe_big, non_pass_alive_stones):
    """The JAX version of :func:`_calculate_area`, one board."""
    players = jnp.array([1, -1], jnp.int8)
    alive, mark, if_empty = jax.vmap(
        lambda pla: _benson_for_player(
            board, pla, suicide_legal=suicide_legal, safe_big=safe_big, unsafe_big=unsafe_big
        )
    )(players)
    result = jnp.zeros_like(board)
    # Black first, then White: White's unconditional marks overwrite Black's,
    # White's conditional marks fill only what Black left empty.
    for i, pla in enumerate((1, -1)):
        result = jnp.where(alive[i] | mark[i], jnp.int8(pla), result)
        result = jnp.where(if_empty[i] & (result == 0), jnp.int8(pla), result)
    if non_pass_alive_stones:
        result = jnp.where(result == 0, board, result)
    return result


def _native_area(boards, suicide, *, flags: tuple[bool, bool, bool]):
    """``[K, P]`` int8 areas of ``boards [K, P]`` (``suicide [K]`` int8): the FFI call on a
    CPU, the JAX version of each board on other platforms."""

    def on_cpu(boards, suicide):
        bits = sum(int(flag) << i for i, flag in enumerate(flags))
        out = jax.ShapeDtypeStruct(boards.shape, jnp.int8)
        return jax.ffi.ffi_call(_NATIVE_TARGET, out)(boards, suicide, flags=np.int32(bits))

    def elsewhere(boards, suicide):
        return jax.vmap(lambda b, s: _area_of_board(b, s != 0, *flags))(boards, suicide)

    return jax.lax.platform_dependent(boards, suicide, cpu=on_cpu, default=elsewhere)


@functools.cache
def _batched_area(flags: tuple[bool, bool, bool]):
    """:func:`_native_area` for ``flags``, one call for a ``vmap``'s boards."""
    return batched_calls(functools.partial(_native_area, flags=flags))


def area_ownership(board: jax.Array, *, multi_stone_suicide_legal: bool = False) -> jax.Array:
    """KataGo's area for input planes 18/19 (AREA scoring, TAX_NONE).

    ``Board::calculateArea`` with ``nonPassAliveStones``, ``safeBigTerritories``
    and ``unsafeBigTerritories`` all true. KataGo feeds plane 18 = (area ==
    pla) and plane 19 = (area == opp).

    Args:
      board: ``[P]`` int8 stones (+1 black, -1 white, 0 empty), ``P = N * N``,
        ``N`` in 2..25.
      multi_stone_suicide_legal: KataGo's suicide flag for pass-alive
        computation (static, or a ``[]`` bool array): KataGo passes the rules'
        multi-stone suicide.

    Returns:
      ``[P]`` int8: +1 where the area is Black's, -1 White's, 0 neither.
    """
    return _calculate_area(
        board,
        suicide_legal=multi_stone_suicide_legal,
        safe_big=True,
        unsafe_big=True,
        non_pass_alive_stones=True,
    )


def pass_alive(board: jax.Array, *, multi_stone_suicide_legal: bool = False) -> jax.Array:
    """Strict Benson pass-alive area: pass-alive chains and their pass-alive territory.

    ``Board::calculateArea`` with all three flags false: pass-alive stones and
    the regions bordered only by pass-alive chains with at most one point not
    adjacent to the player's stones (opponent stones inside count as dead).

    Args:
      board: ``[P]`` int8 stones, as for :func:`area_ownership`.
      multi_stone_suicide_legal: suicide flag for the vital-region test (static).

    Returns:
      ``[P]`` int8: +1 Black's pass-alive area, -1 White's, 0 elsewhere.
    """
    return _calculate_area(
        board,
        suicide_legal=multi_stone_suicide_legal,
        safe_big=False,
        unsafe_big=False,
        non_pass_alive_stones=False,
    )
