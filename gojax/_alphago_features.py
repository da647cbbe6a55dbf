"""AlphaGo's input features (Silver et al. 2016, Extended Data Table 2): 48 planes, + colour.

All planes are for the player to move ("pla"), 0/1, in the paper's order:

====== ======= =================================================================
planes  count   meaning
====== ======= =================================================================
0-2      3      pla stone / opponent stone / empty
3        1      ones
4-11     8      stones by turns since they were played: 1, 2, ..., 7, >= 8
12-19    8      stones by the liberties of their chain: 1, 2, ..., 7, >= 8
20-27    8      legal moves by the opponent stones they capture: 0, 1, ..., 6, >= 7
28-35    8      legal moves leaving their chain with <= 1 liberty, by its size: 1..7, >= 8
36-43    8      legal moves by the liberties of their chain afterwards: 1..7, >= 8
44       1      ladder capture: the move starts a working ladder on an opponent chain
45       1      ladder escape: the move extends a pla chain in atari out of the ladder
46       1      sensibleness: legal and not filling a pla eye
47       1      zeros
48       1      pla is Black (the value network's extra plane)
====== ======= =================================================================

Definitions the paper leaves open, as chosen here:

* Turns since: read from the last 8 moves (``GoState.recent_moves``); a stone
  none of them placed is in the ">= 8" plane (setup stones too).
* Self-atari also counts a suicide the rules allow (the chain is taken at once).
* Ladder capture is KataGo's "working moves" plane (``gojax._ladders``): on an
  opponent chain with two liberties, the liberties where pla's first move
  starts a ladder that captures it.
* Ladder escape: a legal move on the liberty of a pla chain in atari after
  which the chain has >= 3 liberties, or 2 that the opponent, moving first,
  cannot ladder (KataGo's search again). At most :data:`ESCAPE_SEARCHES` such
  2-liberty extensions are searched a position (the lowest points first);
  more chains in atari at once than that do not occur in real games.
* An eye (sensibleness) is an empty point whose neighbours are all pla
  stones or the edge, and whose diagonal points hold fewer than two opponent
  stones (none on the edge): the usual "true eye" test of Monte-Carlo
  programs, which lets a false eye be filled.
* Legality is judged as if the game went on (a finished game's last position
  still has its moves), with every ban of the rule set (ko, superko, suicide).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gojax._board import _OFF_BOARD, BLACK, EMPTY, GoState, legal_moves, neighbor_table
from gojax._ladders import LADDER_SEARCH_BUDGET, _scan_boards

ALPHAGO_POLICY_PLANES = 48
ALPHAGO_PLANES = 49  # the value network's input: the policy's 48 and the colour plane
BUCKETS = 8  # the width of every counted feature
# 2-liberty ladder escapes searched a position (see the module docstring).
ESCAPE_SEARCHES = 4


@functools.cache
def _diagonal_table(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``([P, 4] int32, [P] bool)``: each point's diagonal neighbours (``P`` off the
    board) and whether the point is on the edge."""
    p = size * size
    table = np.full((p, 4), p, dtype=np.int32)
    edge = np.zeros(p, dtype=bool)
    for point in range(p):
        row, col = divmod(point, size)
        edge[point] = row in (0, size - 1) or col in (0, size - 1)
        for k, (dr, dc) in enumerate(((-1, -1), (-1, 1), (1, -1), (1, 1))):
            r, c = row + dr, col + dc
            if 0 <= r < size and 0 <= c < size:
                table[point, k] = r * size + c
    return table, edge


def _bucket(count: jax.Array, first: int, where: jax.Array) -> jax.Array:
    """``[P, 8]`` bool: ``count`` one-hot over ``first, first + 1, ..., first + 6, >= first + 7``,
    only ``where`` is set."""
    index = jnp.clip(count - first, 0, BUCKETS - 1)
    return jax.nn.one_hot(index, BUCKETS, dtype=jnp.bool_) & (where & (count >= first))[:, None]


def _turns_since(state: GoState, stones: jax.Array) -> jax.Array:
    """``[P]`` int32: turns since each stone was played (1 = the last move), 8 when older."""
    p = stones.shape[0]
    since = jnp.full((p,), BUCKETS, jnp.int32)
    moves = state.recent_moves
    for age in reversed(range(min(BUCKETS, moves.shape[0]))):  # the newest last, so it wins
        since = jnp.where(jnp.arange(p) == moves[age], age + 1, since)
    return jnp.where(stones, since, 0)


def true_eyes(board: jax.Array, pla: jax.Array, size: int) -> jax.Array:
    """``[P]`` bool: empty points that are pla's eyes (see the module docstring)."""
    padded = jnp.append(board, jnp.int8(_OFF_BOARD))
    orthogonal = padded[neighbor_table(size)]
    diagonal_points, edge = _diagonal_table(size)
    enemy_diagonals = jnp.sum(padded[diagonal_points] == -pla, axis=-1)
    surrounded = jnp.all((orthogonal == pla) | (orthogonal == _OFF_BOARD), axis=-1)
    return (board == EMPTY) & surrounded & (enemy_diagonals < jnp.where(edge, 1, 2))


class _Moves:
    """What playing each point would do (``[P]`` or ``[P, P]`` arrays, candidate first).

    Computed from the chain labels and liberty counts the state keeps, as sets
    over the board: the new chain is the stone and the pla chains next to it,
    the captured stones are the opponent chains next to it with one liberty,
    and its liberties are the empty points (after the captures) next to it.
    """

    def __init__(self, state: GoState):
        size = state.size
        p = size * size
        board = state.board
        pla = state.to_play
        chain = state.chain.astype(jnp.int32)
        libs = state.liberties.astype(jnp.int32)
        neighbours = jnp.asarray(neighbor_table(size))  # [P, 4], P off the board

        colour = jnp.append(board, jnp.int8(_OFF_BOARD))[neighbours]
        nb_chain = jnp.append(chain, p)[neighbours]
        nb_libs = jnp.append(libs, 0)[neighbours]
        # Count each chain once: a neighbour whose chain an earlier neighbour already has.
        repeated = jnp.stack(
            [jnp.any(nb_chain[:, :k] == nb_chain[:, k : k + 1], axis=-1) for k in range(4)], -1
        )
        sizes = jnp.zeros(p + 1, jnp.int32).at[chain].add(1).at[p].set(0)

        joined = colour == pla
        taken = (colour == -pla) & (nb_libs == 1)
        self.captures = jnp.sum(jnp.where(taken & ~repeated, sizes[nb_chain], 0), axis=-1)
        self.chain_size = 1 + jnp.sum(jnp.where(joined & ~repeated, sizes[nb_chain], 0), axis=-1)

        def members(mask):  # [P, P]: stones of the chains next to each candidate selected by mask
            reps = jnp.where(mask, nb_chain, -1)
            return jnp.any(chain[None, :, None] == reps[:, None, :], axis=-1)

        itself = jnp.eye(p, dtype=bool)
        new_chain = members(joined) | itself
        self.captured = members(taken)  # [P, P]
        empty_after = ((board == EMPTY)[None, :] & ~itself) | self.captured
        # [P, P]: point q touches the new chain of candidate c. Shifted grids, not a gather
        # through the neighbour table: with XLA's CPU gather the encoder ran at half the rate.
        grid = jnp.pad(new_chain.reshape(p, size, size), ((0, 0), (1, 1), (1, 1)))
        next_to_chain = (
            grid[:, :-2, 1:-1] | grid[:, 2:, 1:-1] | grid[:, 1:-1, :-2] | grid[:, 1:-1, 2:]
        ).reshape(p, p)
        self.liberties = jnp.sum(empty_after & next_to_chain, axis=-1)
        self.atari_liberty = jnp.any(joined & (nb_libs == 1), axis=-1)


def alphago_planes(state: GoState, dtype=jnp.float32) -> jax.Array:
    """``[N, N, 49]`` AlphaGo input planes of one position (see the module docstring).

    The policy network reads the first 48 (``[..., :ALPHAGO_POLICY_PLANES]``),
    the value network all 49. Jittable; batch it with ``jax.vmap``.
    """
    size = state.size
    p = size * size
    board = state.board
    pla = state.to_play
    stones = board != EMPTY
    live = state.replace(terminated=jnp.zeros_like(state.terminated))
    legal = legal_moves(live)[:p]
    moves = _Moves(state)

    # Escapes that leave two liberties need a ladder search on the board after the move.
    candidates = legal & moves.atari_liberty & (moves.liberties == 2)
    (points,) = jnp.nonzero(candidates, size=ESCAPE_SEARCHES, fill_value=0)
    searched = jnp.arange(ESCAPE_SEARCHES) < jnp.sum(candidates)
    after = jnp.where(moves.captured[points], EMPTY, board[None, :])
    after = after.at[jnp.arange(ESCAPE_SEARCHES), points].set(pla)
    boards = jnp.concatenate([board[None], after]).astype(jnp.int8)
    n = ESCAPE_SEARCHES + 1
    kos = jnp.concatenate([state.ko[None].astype(jnp.int32), jnp.full(n - 1, -1, jnp.int32)])
    to_play = jnp.concatenate([pla[None], jnp.full(n - 1, -pla)]).astype(jnp.int8)
    laddered, working = _scan_boards(boards, kos, to_play, jnp.full(n, LADDER_SEARCH_BUDGET))
    escaped_search = searched & ~laddered[1 + jnp.arange(ESCAPE_SEARCHES), points]
    escapes = jnp.zeros(p, bool).at[points].max(escaped_search)
    escapes = escapes | (legal & moves.atari_liberty & (moves.liberties >= 3))

    sensible = legal & ~true_eyes(board, pla, size)
    self_atari = legal & (moves.liberties <= 1)
    ones = jnp.ones((p, 1), bool)
    planes = jnp.concatenate(
        [
            jnp.stack([board == pla, board == -pla, board == EMPTY], -1),
            ones,
            _bucket(_turns_since(state, stones), 1, stones),
            _bucket(state.liberties.astype(jnp.int32), 1, stones),
            _bucket(moves.captures, 0, legal),
            _bucket(moves.chain_size, 1, self_atari),
            _bucket(moves.liberties, 1, legal),
            working[0][:, None],
            escapes[:, None],
            sensible[:, None],
            ~ones,
            jnp.broadcast_to(pla == BLACK, (p, 1)),
        ],
        axis=-1,
    )
    return planes.astype(dtype).reshape(size, size, ALPHAGO_PLANES)
