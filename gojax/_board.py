"""The Go board: a frozen pytree and pure functions on one board.

Everything here is written for a single board and batched with ``jax.vmap``
by the caller. The board size is read from array shapes and the rule set and
move cap are static fields of the state, so they live in the pytree's treedef
and a jitted function is specialised to them; nothing traced decides a shape.
The public functions are themselves jitted: called eagerly (a GTP engine, an
SGF replay, a user's loop) they run one compiled program -- unjitted, each
call rebuilt and recompiled their loops (~0.1 s a move); inside a caller's
``jit`` or ``vmap`` they inline as before.

Representation (``P = size * size`` points, action ``row * size + col``, row 0
on top, ``P`` = pass):

* ``board`` holds the stones; ``chain`` labels each stone with the index of
  one stone of its chain (a representative), and ``liberties`` gives at each
  stone the number of distinct empty points adjacent to its chain. A move
  merges chains by relabelling, removes captured chains by their labels,
  and updates liberties around the played point (a full recount, one
  scatter-add over empty points, only after a capture or a suicide): a
  constant number of O(P) vectorised passes per move, no flood fill.
* The position hash is a Zobrist hash on two 32-bit lanes (64 bits). Keys are
  combined by addition modulo 2**32 per lane rather than XOR: it is just as
  random, and lets a chain's key sum be computed with one segment-sum, which
  the superko test needs for every candidate capture.
* Superko history is kept as a *sorted* array of 64-bit keys
  (``gojax._superko_table``), so testing all ``P`` candidate moves costs ``P``
  lookups instead of ``P * H`` comparisons.

Counting a position (area, score, winner) is ``gojax._counting``; handicap
placement is ``gojax._setup``'s.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gojax._coords import MAX_SIZE, MIN_SIZE
from gojax._rules import RUNTIME_RULES, Rules, RuleValues, get_rules, rule_values, rules_code
from gojax._superko_table import UNUSED_KEY, contains, insert_sorted

BLACK = 1
WHITE = -1
EMPTY = 0
_OFF_BOARD = 2  # colour value read beyond the edge by neighbour lookups
RECENT_MOVES = 8  # how many past actions the state remembers
# A batched move recounts liberties on up to B / RECOUNT_DIVISOR boards at a time (the ones
# where it removed stones; all of them when more need it): 16 was ~2% faster than 8 or 32
# in a b1c16 search at batch 256, where ~1% of the moves capture.
RECOUNT_DIVISOR = 16


@struct.dataclass
class GoState:
    """One Go position with the history its rules and input features need.

    Shapes for a board of side ``N`` (``P = N * N``), ``K`` past boards and a
    superko table of ``H`` entries (``max_moves + 1`` under superko rules,
    ``0`` under simple ko).

    Under :data:`RUNTIME_RULES` (``new_game(..., runtime_rules=True)``) ``rules`` is
    the same for every rule set and ``rule_code`` says which preset the game plays:
    one compiled program for all of them.
    """

    board: jax.Array  # [P] int8: +1 black, -1 white, 0 empty
    chain: jax.Array  # [P] int16: representative stone of each stone's chain; P on empty points
    liberties: jax.Array  # [P] int16: liberties of the chain of each stone; 0 on empty points
    to_play: jax.Array  # [] int8: +1 black, -1 white
    ko: jax.Array  # [] int16: point banned by the simple-ko rule, -1 if none
    move_number: jax.Array  # [] int32: moves played so far, passes included
    passes: jax.Array  # [] int8: consecutive passes just played
    terminated: jax.Array  # [] bool: two passes in a row, or the move cap reached
    komi: jax.Array  # [] float32: points given to White
    captures: jax.Array  # [2] int16: stones captured by Black, by White (suicides included)
    zobrist: jax.Array  # [2] uint32: hash of the stones (two 32-bit lanes)
    superko_keys: jax.Array  # [H, 2] uint32: keys of earlier positions, sorted by lane 0
    superko_count: jax.Array  # [] int32: how many entries of superko_keys are used
    past_boards: jax.Array  # [K, P] int8: board before the last move, the one before, ...
    recent_moves: jax.Array  # [8] int16: last actions, newest first; P = pass, -1 = none
    rules: Rules = struct.field(pytree_node=False)
    max_moves: int = struct.field(pytree_node=False)
    rule_code: jax.Array | None = None  # [] int8 under RUNTIME_RULES (gojax._rules); else None

    @property
    def rule_values(self) -> RuleValues:
        """The rules as this state's programs read them (``gojax._rules.rule_values``)."""
        return rule_values(self.rules, self.rule_code)

    @property
    def size(self) -> int:
        """Board side ``N`` (static)."""
        return math.isqrt(self.board.shape[-1])

    @property
    def num_actions(self) -> int:
        """``N * N + 1``: every point, then pass."""
        return self.board.shape[-1] + 1


# ----------------------------------------------------------------------------
# Static tables (NumPy, built once per board size).


@functools.cache
def neighbor_table(size: int) -> np.ndarray:
    """``[P, 4]`` int32: up, down, left, right neighbour of each point; ``P`` off the board."""
    p = size * size
    table = np.full((p, 4), p, dtype=np.int32)
    for point in range(p):
        row, col = divmod(point, size)
        if row > 0:
            table[point, 0] = point - size
        if row < size - 1:
            table[point, 1] = point + size
        if col > 0:
            table[point, 2] = point - 1
        if col < size - 1:
            table[point, 3] = point + 1
    return table


@functools.cache
def zobrist_keys(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``([2, P, 2] uint32, [2] uint32)``: keys per (black, white) × point × lane; White to play.

    Drawn from a fixed seed so that hashes are the same in every process.
    """
    rng = np.random.default_rng(0x60A1 + size)
    stones = rng.integers(0, 2**32, size=(2, size * size, 2), dtype=np.uint32)
    white_to_play = rng.integers(0, 2**32, size=(2,), dtype=np.uint32)
    return stones, white_to_play


def _validate_size(size: int) -> None:
    if not isinstance(size, int | np.integer) or not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"board size must be an integer in {MIN_SIZE}..{MAX_SIZE}, got {size!r}")


# ----------------------------------------------------------------------------
# Vectorised neighbourhood helpers on a flat board.


def _shifts(grid: jax.Array, fill) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``[N, N, ...]`` → the value at each point's up, down, left and right neighbour.

    Four separate arrays rather than one stacked array: XLA fuses each into
    the elementwise code that consumes it, where a stack would be copied out.
    """
    pad = [(1, 1), (1, 1)] + [(0, 0)] * (grid.ndim - 2)
    padded = jnp.pad(grid, pad, constant_values=fill)
    return padded[:-2, 1:-1], padded[2:, 1:-1], padded[1:-1, :-2], padded[1:-1, 2:]


def _distinct(up, down, left, right):
    """Per neighbour: its label differs from the labels of the neighbours before it.

    Two neighbours of a point often belong to the same chain; counting each
    chain once is what makes liberty counts and capture sums exact.
    """
    return (
        jnp.ones_like(up, dtype=bool),
        down != up,
        (left != up) & (left != down),
        (right != up) & (right != down) & (right != left),
    )


def _count_liberties(board: jax.Array, chain: jax.Array, size: int) -> jax.Array:
    """``[P]`` int16: liberties of the chain represented at each index (0 elsewhere).

    Each empty point adds one to every distinct chain next to it: one
    scatter-add of ``4 P`` updates.
    """
    p = size * size
    empty = (board == EMPTY).reshape(size, size)
    nb_chain = _shifts(chain.reshape(size, size), p)
    targets = [
        jnp.where(empty & (label != p) & first, label, p).reshape(-1)
        for label, first in zip(nb_chain, _distinct(*nb_chain), strict=True)
    ]
    return _histogram(jnp.concatenate(targets))[:p]


def _liberties_at(board: jax.Array, chain: jax.Array, size: int) -> jax.Array:
    """``[P]`` int16: liberties of the chain of each stone, 0 on empty points (a full count)."""
    counts = _count_liberties(board, chain, size)
    return jnp.append(counts, jnp.int16(0))[chain]


@jax.custom_batching.custom_vmap
def _histogram(labels: jax.Array) -> jax.Array:
    """``[4 P]`` chain labels (``P`` = none) → ``[P + 1]`` int16: how often each occurs.

    One scatter-add; int16 accumulation because XLA's CPU scatter runs about
    twice as fast as with int32. Batched by :func:`_histogram_batched`.
    """
    bins = labels.shape[0] // 4 + 1
    return jnp.zeros(bins, jnp.int16).at[labels].add(jnp.int16(1), mode="promise_in_bounds")


@_histogram.def_vmap
def _histogram_batched(axis_size: int, in_batched, labels: jax.Array):
    """``[B, 4 P]`` → ``[B, P + 1]``: all boards' counts as one scatter into a flat array.

    ``vmap`` of the scatter above indexes a ``[B, P + 1]`` array by (board,
    label) pairs, which XLA builds as a ``[B * 4 P, 2]`` index array every move;
    offsetting each board's labels by ``board * (P + 1)`` makes one 1-D index
    instead (a b1c16 Gumbel search at batch 256 on a CPU: 1.8% faster). Only on
    a CPU: when XLA partitions a jitted batch over devices (a sharded ``jit``;
    gojax's own arena and self-play use ``shard_map``, one program per device),
    it cannot tell that flat indices stay on their own device's part and adds
    an all-reduce of the counts to every move, a poor trade on GPUs and TPUs,
    where the vmapped scatter is kept.
    """
    (batched,) = in_batched
    if not batched:
        labels = jnp.broadcast_to(labels, (axis_size, *labels.shape))
    if jax.default_backend() != "cpu":
        return jax.vmap(_histogram.fun)(labels), True
    bins = labels.shape[-1] // 4 + 1
    offsets = jnp.arange(axis_size, dtype=jnp.int32)[:, None] * bins
    flat = (labels.astype(jnp.int32) + offsets).reshape(-1)
    counts = jnp.zeros(axis_size * bins, jnp.int16)
    counts = counts.at[flat].add(jnp.int16(1), mode="promise_in_bounds")
    return counts.reshape(axis_size, bins), True


def _liberties_after_placing(
    liberties: jax.Array, board: jax.Array, chain: jax.Array, point: jax.Array, shortened
) -> jax.Array:
    """``[P]`` int16: liberties after a stone at ``point`` that captured nothing.

    Only two chains' counts change: the chain through ``point`` (the stone and
    the friendly chains it joined; counted afresh: empty points next to one of
    its stones), and the distinct enemy chains next to ``point`` (``shortened
    [4]``: their labels, -1 for none), which lose that one liberty.
    ``board`` and ``chain`` are the position after the move.
    """
    size = math.isqrt(board.shape[-1])
    members = chain == point
    lost = jnp.sum(chain[:, None] == shortened[None, :], axis=1, dtype=jnp.int16)
    next_to = functools.reduce(jnp.logical_or, _shifts(members.reshape(size, size), False))
    own = jnp.sum((board == EMPTY) & next_to.reshape(-1), dtype=jnp.int16)
    return jnp.where(members, own, liberties - lost)


@jax.custom_batching.custom_vmap
def _liberties_after_move(liberties, board, chain, point, shortened, recount):
    """``[P]`` int16: liberties after a move; a full recount if ``recount`` (a capture or a
    suicide changed more than the neighbourhood), else :func:`_liberties_after_placing`.

    ``point`` is ``P`` for a pass (nothing changes). Batched by
    :func:`_liberties_after_move_batched`, which recounts only the boards that need it.
    """
    size = math.isqrt(board.shape[-1])
    return jax.lax.cond(
        recount,
        lambda: _liberties_at(board, chain, size),
        lambda: _placed_or_passed(liberties, board, chain, point, shortened),
    )


def _placed_or_passed(liberties, board, chain, point, shortened):
    placed = _liberties_after_placing(liberties, board, chain, point, shortened)
    return jnp.where(point == board.shape[-1], liberties, placed)


@_liberties_after_move.def_vmap
def _liberties_after_move_batched(axis_size: int, in_batched, *args):
    """``[B]`` boards: the incremental update for all, a full recount only where needed.

    A capture or a suicide happens in about 1% of the moves of a search, but in
    some board of a batch of 256 almost every move, so a per-board choice would
    recount every board (``vmap`` of a ``cond`` runs both branches). Instead the
    boards that need it (up to ``B / RECOUNT_DIVISOR``; all of them past that) are gathered,
    recounted and written back. A b1c16 Gumbel search at batch 256 on a CPU
    spent ~8% of its time in the full recount.
    """
    args = [
        a if batched else jnp.broadcast_to(a, (axis_size, *jnp.shape(a)))
        for a, batched in zip(args, in_batched, strict=True)
    ]
    liberties, board, chain, point, shortened, recount = args
    size = math.isqrt(board.shape[-1])
    updated = jax.vmap(_placed_or_passed)(liberties, board, chain, point, shortened)
    if axis_size == 0:  # an empty batch: nothing to recount (and no row to gather)
        return updated, True
    count = jax.vmap(functools.partial(_liberties_at, size=size))
    slots = max(1, axis_size // RECOUNT_DIVISOR)

    def some():
        (rows,) = jnp.nonzero(recount, size=slots, fill_value=axis_size)
        safe = jnp.minimum(rows, axis_size - 1)
        return updated.at[rows].set(count(board[safe], chain[safe]), mode="drop")

    def every():
        return jnp.where(recount[:, None], count(board, chain), updated)

    needed = jnp.sum(recount, dtype=jnp.int32)
    branch = (needed > 0).astype(jnp.int32) + (needed > slots).astype(jnp.int32)
    return jax.lax.switch(branch, [lambda: updated, some, every]), True


# Jitted (size static) so that eager callers (a new game, an SGF's setup) reuse one
# compiled loop: an eager while_loop of fresh closures recompiled on every call.
@functools.partial(jax.jit, static_argnames="size")
def _label_chains(board: jax.Array, size: int) -> jax.Array:
    """``[P]`` int16: chain labels from scratch (minimum point index of each chain).

    Label propagation to a fixed point; used for setup positions only.
    """
    p = size * size
    start = jnp.where(board != EMPTY, jnp.arange(p, dtype=jnp.int32), p)

    grid = board.reshape(size, size)
    nb_color = _shifts(grid, _OFF_BOARD)

    def step(labels):
        best = labels.reshape(size, size)
        for color, label in zip(nb_color, _shifts(best, p), strict=True):
            best = jnp.minimum(best, jnp.where(color == grid, label, p))
        return jnp.where(board != EMPTY, best.reshape(-1), p)

    def cond(carry):
        labels, previous = carry
        return jnp.any(labels != previous)

    labels, _ = jax.lax.while_loop(
        cond, lambda carry: (step(carry[0]), carry[0]), (step(start), start)
    )
    return labels.astype(jnp.int16)


def _stone_keys(board: jax.Array, size: int) -> jax.Array:
    """``[P, 2]`` uint32: the Zobrist key of the stone on each point (0 if empty)."""
    keys, _ = zobrist_keys(size)
    zero = jnp.zeros((), jnp.uint32)
    return jnp.where(
        (board == BLACK)[:, None],
        keys[0],
        jnp.where((board == WHITE)[:, None], keys[1], zero),
    )


@jax.jit
def position_hash(board: jax.Array) -> jax.Array:
    """``[P]`` board → ``[2]`` uint32 Zobrist hash of its stones, computed from scratch."""
    size = math.isqrt(board.shape[-1])
    return jnp.sum(_stone_keys(board, size), axis=0, dtype=jnp.uint32)


def _superko_key(zobrist: jax.Array, to_play: jax.Array, rules: RuleValues, size: int) -> jax.Array:
    """The key a position is remembered by: stones, plus the player to move if situational."""
    if rules.situational is False:
        return zobrist
    _, white_to_play = zobrist_keys(size)
    add = (to_play == WHITE) & rules.situational
    return zobrist + jnp.where(add, white_to_play, jnp.zeros((), jnp.uint32))


# ----------------------------------------------------------------------------
# Public API.


def new_game(
    size: int = 19,
    *,
    komi: float | jax.Array = 7.5,
    rules: str | Rules = "tromp-taylor",
    max_moves: int | None = None,
    history: int = 7,
    board: jax.Array | np.ndarray | None = None,
    to_play: int | jax.Array = BLACK,
    runtime_rules: bool = False,
    rule_code: int | jax.Array | None = None,
) -> GoState:
    """A new game.

    Args:
      size: board side, 2..25 (static).
      komi: points given to White (may be traced).
      rules: a preset name (``tromp-taylor``, ``chinese``, ``chinese-ogs``,
        ``aga``, ``new-zealand``) or a :class:`Rules` (static).
      max_moves: move cap after which the game ends (passes count); default
        ``2 * size * size``, as pgx uses (static).
      history: how many past boards to keep for input features (7 gives
        AlphaGo Zero's 8 positions; static).
      board: optional ``[size*size]`` setup stones (+1 black, -1 white),
        e.g. handicap stones from :func:`handicap_points`. Chains without
        liberties are not removed: a setup position must be legal.
      to_play: who moves first (+1 black, -1 white); White after handicap.
      runtime_rules: keep the preset ``rules`` as data (``state.rule_code``, static
        ``rules`` :data:`RUNTIME_RULES`): programs compiled for one preset then serve
        every preset, at the cost of a superko table under every rule set and of
        computing what differs between them (area features, both scorings).
      rule_code: with ``rules`` :data:`RUNTIME_RULES` itself (a runtime state's
        ``rules``), the preset played (a runtime state's ``rule_code``; may be traced).

    Returns:
      The state before the first move.
    """
    _validate_size(size)
    rules = get_rules(rules)
    if max_moves is None:
        max_moves = 2 * size * size
    if max_moves < 1 or history < 0:
        raise ValueError(f"need max_moves >= 1 and history >= 0, got {max_moves}, {history}")
    p = size * size
    if board is None:
        stones = jnp.zeros(p, jnp.int8)
    else:
        stones = jnp.asarray(board, jnp.int8).reshape(p)
    if runtime_rules and not rules.runtime:
        rule_code, rules = rules_code(rules), RUNTIME_RULES
    if rules.runtime != (rule_code is not None):
        raise ValueError("a rule_code goes with RUNTIME_RULES, and only with them")
    code = None if rule_code is None else jnp.asarray(rule_code, jnp.int8)
    num_keys = max_moves + 1 if rules.superko else 0
    state = GoState(
        board=stones,
        chain=jnp.full(p, p, jnp.int16),
        liberties=jnp.zeros(p, jnp.int16),
        to_play=jnp.asarray(to_play, jnp.int8),
        ko=jnp.asarray(-1, jnp.int16),
        move_number=jnp.asarray(0, jnp.int32),
        passes=jnp.asarray(0, jnp.int8),
        terminated=jnp.asarray(False),
        komi=jnp.asarray(komi, jnp.float32),
        captures=jnp.zeros(2, jnp.int16),
        zobrist=jnp.zeros(2, jnp.uint32),
        superko_keys=jnp.full((num_keys, 2), UNUSED_KEY, jnp.uint32),
        superko_count=jnp.asarray(0, jnp.int32),
        past_boards=jnp.zeros((history, p), jnp.int8),
        recent_moves=jnp.full(RECENT_MOVES, -1, jnp.int16),
        rules=rules,
        max_moves=max_moves,
        rule_code=code,
    )
    return set_board(state, stones)


@jax.jit  # one compiled program for eager calls (each new game), not a dozen dispatches
def set_board(state: GoState, board: jax.Array) -> GoState:
    """Replace the stones (setup, as SGF's AB/AW/AE), keeping the move history.

    Chains, liberties and the hash are recomputed; the ko ban is cleared and
    the new position is remembered for superko.
    """
    size = state.size
    board = jnp.asarray(board, jnp.int8).reshape(size * size)
    chain = _label_chains(board, size)
    zobrist = position_hash(board)
    keys, count = insert_sorted(
        state.superko_keys,
        state.superko_count,
        _superko_key(zobrist, state.to_play, state.rule_values, size),
    )
    return state.replace(
        board=board,
        chain=chain,
        liberties=_liberties_at(board, chain, size),
        ko=jnp.asarray(-1, jnp.int16),
        zobrist=zobrist,
        superko_keys=keys,
        superko_count=count,
    )


@jax.jit
def play(state: GoState, action: jax.Array | int) -> GoState:
    """Play ``action`` (``row * size + col``, or ``size * size`` to pass) for ``state.to_play``.

    The move must be legal (see :func:`legal_moves`); an illegal move gives an
    unspecified position. Playing on a terminated game returns it unchanged.
    Captures, the ko point, suicide under rules that allow it, the superko
    history, pass counting and the end of the game are all handled here.
    """
    size = state.size
    p = size * size
    rules = state.rule_values
    action = jnp.asarray(action, jnp.int32)
    is_pass = action == p
    point = jnp.clip(action, 0, p - 1)
    me = state.to_play
    them = -me

    # The four neighbours of the played point and the chains they belong to.
    nbrs = jnp.asarray(neighbor_table(size))[point]  # [4]
    nb_color = jnp.append(state.board, jnp.int8(_OFF_BOARD))[nbrs]
    nb_chain = jnp.append(state.chain, jnp.int16(p))[nbrs]
    nb_libs = jnp.append(state.liberties, jnp.int16(0))[nbrs]
    capturing = (nb_color == them) & (nb_libs == 1) & ~is_pass  # [4]
    joining = (nb_color == me) & ~is_pass  # [4]
    # No liberty left after the move: nothing captured, no empty neighbour, and
    # every friendly neighbour chain had the played point as its last liberty.
    suicide = (
        ~is_pass
        & ~jnp.any(nb_color == EMPTY)
        & ~jnp.any(capturing)
        & jnp.all(~joining | (nb_libs == 1))
    )

    def member_of(selected):  # [4] → [P]: stones of the selected neighbour chains
        hit = selected[:, None] & (state.chain[None, :] == nb_chain[:, None])
        return jnp.any(hit, axis=0)

    captured = member_of(capturing) & (state.board == them)
    is_point = jnp.arange(p) == point
    merged = member_of(joining) | (is_point & ~is_pass)
    removed_own = merged & suicide & (state.board == me)

    board = jnp.where(captured, EMPTY, state.board)
    board = jnp.where(merged, jnp.where(suicide, EMPTY, me), board).astype(jnp.int8)
    chain = jnp.where(merged, point, state.chain)
    chain = jnp.where(board == EMPTY, p, chain).astype(jnp.int16)
    # Liberties change only around the move unless it removed stones.
    first = _distinct(*[nb_chain[k] for k in range(4)])
    liberties = _liberties_after_move(
        state.liberties,
        board,
        chain,
        jnp.where(is_pass, p, point),
        jnp.where((nb_color == them) & jnp.stack(first), nb_chain, -1).astype(jnp.int16),
        jnp.any(capturing) | suicide,
    )

    # Simple ko: one stone captured by a lone stone that is left in atari.
    num_captured = jnp.sum(captured, dtype=jnp.int32)
    lone = ~jnp.any(joining)
    ko = jnp.where(
        (num_captured == 1) & lone & (liberties[point] == 1),
        jnp.argmax(captured),
        -1,
    ).astype(jnp.int16)

    # Incremental hash: add the placed stone, subtract what left the board.
    keys, _ = zobrist_keys(size)
    mine = jnp.where(me == BLACK, keys[0], keys[1])  # [P, 2]
    theirs = jnp.where(me == BLACK, keys[1], keys[0])
    zero = jnp.zeros((), jnp.uint32)
    placed = ~is_pass & ~suicide
    zobrist = (
        state.zobrist
        + jnp.where(placed, mine[point], zero)
        - jnp.sum(jnp.where(captured[:, None], theirs, zero), axis=0, dtype=jnp.uint32)
        - jnp.sum(jnp.where(removed_own[:, None], mine, zero), axis=0, dtype=jnp.uint32)
    )
    superko_keys, superko_count = insert_sorted(
        state.superko_keys, state.superko_count, _superko_key(zobrist, them, rules, size)
    )

    # A suicide's prisoners are the whole chain, the stone just placed included (as
    # KataGo counts them); ``removed_own`` leaves that stone out for the hash, which
    # never had its key added.
    num_removed_own = jnp.sum(merged & suicide, dtype=jnp.int16)
    captures = state.captures + jnp.where(
        me == BLACK,
        jnp.stack([num_captured.astype(jnp.int16), num_removed_own]),
        jnp.stack([num_removed_own, num_captured.astype(jnp.int16)]),
    )
    passes = jnp.where(is_pass, state.passes + 1, 0).astype(jnp.int8)
    move_number = state.move_number + 1
    past_boards = jnp.concatenate([state.board[None], state.past_boards[:-1]])[
        : state.past_boards.shape[0]
    ]
    recent_moves = jnp.concatenate([action.astype(jnp.int16)[None], state.recent_moves[:-1]])

    new = state.replace(
        board=board,
        chain=chain,
        liberties=liberties,
        to_play=them,
        ko=ko,
        move_number=move_number,
        passes=passes,
        terminated=(passes >= 2) | (move_number >= state.max_moves),
        captures=captures,
        zobrist=zobrist,
        superko_keys=superko_keys,
        superko_count=superko_count,
        past_boards=past_boards,
        recent_moves=recent_moves,
    )
    return jax.tree.map(lambda old, nxt: jnp.where(state.terminated, old, nxt), state, new)


@functools.partial(jax.jit, static_argnames="superko")
def legal_moves(state: GoState, *, superko: bool = True) -> jax.Array:
    """``[P + 1]`` bool: the moves ``state.to_play`` may make; the last entry is pass.

    Excludes occupied points, suicide the rules forbid (single-stone suicide
    always), the simple-ko point, and, under positional or situational
    superko, every move that would recreate an earlier position. Pass is
    always legal; a terminated game has no legal move. ``superko=False``
    leaves the superko bans out (static).
    """
    size = state.size
    p = size * size
    rules = state.rule_values
    me = state.to_play
    them = -me

    board = state.board.reshape(size, size)
    nb_color = _shifts(board, _OFF_BOARD)
    nb_libs = _shifts(state.liberties.reshape(size, size), 0)
    has_empty = safe_join = captures = has_mine = False
    for color, libs in zip(nb_color, nb_libs, strict=True):
        has_empty = has_empty | (color == EMPTY)
        safe_join = safe_join | ((color == me) & (libs >= 2))
        captures = captures | ((color == them) & (libs == 1))
        has_mine = has_mine | (color == me)
    suicide = ~has_empty & ~safe_join & ~captures
    allowed_suicide = has_mine & rules.multi_stone_suicide
    legal = (board == EMPTY) & (~suicide | allowed_suicide)
    legal = legal.reshape(-1) & (jnp.arange(p) != state.ko)

    if rules.superko is not False and superko:
        banned = _superko_banned(state, rules, nb_color, nb_libs, suicide.reshape(-1))
        legal = legal & ~(banned & rules.superko)

    legal = jnp.append(legal, True)
    return legal & ~state.terminated


@jax.jit
def repetition_bans(state: GoState) -> jax.Array:
    """``[P]`` bool: points banned only by repetition — the simple-ko point plus superko bans.

    These are the empty points that would be legal but for ko (KataGo's input
    plane 6: ``ko_loc`` and ``superKoBanned``).
    """
    ignoring_repetition = legal_moves(state.replace(ko=jnp.asarray(-1, jnp.int16)), superko=False)
    legal = legal_moves(state)
    return ignoring_repetition[:-1] & ~legal[:-1] & ~state.terminated


def _superko_banned(state: GoState, rules: RuleValues, nb_color, nb_libs, suicide) -> jax.Array:
    """``[P]`` bool: moves whose resulting position (or situation) occurred before."""
    size = state.size
    p = size * size
    me = state.to_play
    keys, _ = zobrist_keys(size)
    zero = jnp.zeros((), jnp.uint32)

    # Key sum of every chain, then for each candidate the sums of the distinct
    # neighbour chains it would capture (or, for a suicide, remove).
    chain_sum = (
        jnp.zeros((p + 1, 2), jnp.uint32)
        .at[state.chain]
        .add(_stone_keys(state.board, size), mode="promise_in_bounds")
    )
    nb_chain = _shifts(state.chain.reshape(size, size), p)
    nb_sum = _shifts(chain_sum[state.chain].reshape(size, size, 2), 0)
    captured_sum = own_sum = zero
    for color, libs, label_sum, first in zip(
        nb_color, nb_libs, nb_sum, _distinct(*nb_chain), strict=True
    ):
        capture = ((color == -me) & (libs == 1) & first)[..., None]
        own = ((color == me) & first)[..., None]
        captured_sum = captured_sum + jnp.where(capture, label_sum, zero)
        own_sum = own_sum + jnp.where(own, label_sum, zero)
    captured_sum = captured_sum.reshape(p, 2)
    own_sum = own_sum.reshape(p, 2)
    mine = jnp.where(me == BLACK, keys[0], keys[1])
    after = jnp.where(
        suicide[:, None],
        state.zobrist - own_sum,
        state.zobrist + mine - captured_sum,
    )
    after = _superko_key(after, -me, rules, size)
    return contains(state.superko_keys, state.superko_count, after)
