"""Setup stones: one check for every way stones are placed without being played.

SGF ``AB``/``AW``/``AE`` (``gojax show``, ``gojax analyze``, GTP ``loadsgf``),
GTP ``set_position`` and the handicap commands, and the analysis engine's
``initialStones`` all go through :func:`place_stones`. It refuses a point set
twice (no defined meaning: FF[4] forbids it, and a last-one-wins reading
would hide a caller's mistake) and a chain left without a liberty: play never
makes one, and the board functions assume there is none (``new_game`` and
``set_board`` keep such a chain on the board).

Host-side NumPy: a setup is checked once, before any compiled code sees it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gojax._board import BLACK, EMPTY, WHITE, _validate_size, neighbor_table
from gojax._coords import action_to_gtp

_COLOUR_NAMES = {BLACK: "black", WHITE: "white"}


class SetupError(ValueError):
    """Setup stones that make no legal position; ``point`` is the action index at fault."""

    def __init__(self, message: str, point: int | None = None) -> None:
        super().__init__(message)
        self.point = point


def repeated_point(points: Iterable[int]) -> int | None:
    """The index in ``points`` of the first point that was given before, else None.

    >>> repeated_point([3, 5, 3]), repeated_point([1, 2])
    (2, None)
    """
    seen: set[int] = set()
    for index, point in enumerate(points):
        if point in seen:
            return index
        seen.add(point)
    return None


def chain_without_liberty(board: np.ndarray, size: int) -> int | None:
    """The first point (in action order) of a chain with no liberty on ``board [P]``, else None."""
    board = np.asarray(board).reshape(-1)
    p = size * size
    neighbours = neighbor_table(size)
    padded = np.append(board, np.int8(2))  # off the board: neither a stone nor empty
    # Stones with an empty neighbour have a liberty; a chain has one when any stone does.
    free = (board != EMPTY) & np.any(padded[neighbours] == EMPTY, axis=1)
    reached = free.copy()
    frontier = list(np.flatnonzero(free))
    while frontier:  # flood the liberty outwards through same-coloured neighbours
        point = frontier.pop()
        for other in neighbours[point]:
            if other < p and not reached[other] and board[other] == board[point]:
                reached[other] = True
                frontier.append(other)
    stuck = np.flatnonzero((board != EMPTY) & ~reached)
    return int(stuck[0]) if stuck.size else None


def place_stones(
    size: int, stones: Iterable[tuple[int, int]], *, board: np.ndarray | None = None
) -> np.ndarray:
    """``[P]`` int8: ``board`` (default: empty) with ``stones`` placed, checked.

    Args:
      size: board side.
      stones: ``(colour, point)`` pairs: colour ``BLACK``, ``WHITE``, or ``EMPTY``
        to clear the point (SGF ``AE``); point an action index on the board.
      board: ``[P]`` stones already there (a later SGF setup node), left unchanged.

    Raises:
      SetupError: a point off the board or a colour that is none of the three,
        a point given twice, or a chain left without a liberty; the message
        names the point as a GTP vertex.

    >>> place_stones(9, [(BLACK, 0), (WHITE, 1)]).reshape(9, 9)[0, :3].tolist()
    [1, -1, 0]
    >>> place_stones(9, [(BLACK, 1), (BLACK, 9), (WHITE, 0)])
    Traceback (most recent call last):
    ...
    gojax._setup.SetupError: the white chain at A9 has no liberty
    """
    p = size * size
    stones = [(int(colour), int(point)) for colour, point in stones]
    for colour, point in stones:
        if not 0 <= point < p:
            raise SetupError(f"point {point} is off the {size}x{size} board", point)
        if colour not in (BLACK, WHITE, EMPTY):
            raise SetupError(f"colour {colour} is not black, white or empty", point)
    repeat = repeated_point(point for _, point in stones)
    if repeat is not None:
        point = stones[repeat][1]
        raise SetupError(f"point {action_to_gtp(point, size)} is set up twice", point)
    placed = np.zeros(p, np.int8) if board is None else np.asarray(board, np.int8).reshape(p)
    placed = placed.copy()
    for colour, point in stones:
        placed[point] = colour
    stuck = chain_without_liberty(placed, size)
    if stuck is not None:
        name = _COLOUR_NAMES[int(placed[stuck])]
        raise SetupError(f"the {name} chain at {action_to_gtp(stuck, size)} has no liberty", stuck)
    return placed


def handicap_points(size: int, stones: int) -> list[int]:
    """GTP ``fixed_handicap`` placement: the points for ``stones`` handicap stones.

    Defined for 2..9 stones on boards of side 7 or more (at most 4 on even
    sides and side 7), as GTP specifies.
    """
    _validate_size(size)
    if stones < 2 or stones > 9 or size < 7:
        raise ValueError(f"fixed handicap needs 2..9 stones on a board of 7 or more, got {stones}")
    if (size % 2 == 0 or size == 7) and stones > 4:
        raise ValueError(f"at most 4 fixed handicap stones on {size}x{size}")
    edge = 2 if size < 13 else 3
    low, mid, high = edge, size // 2, size - 1 - edge

    def at(row, col):
        return row * size + col

    # GTP order on 19x19: D4 Q16 D16 Q4, then D10 Q10, then K4 K16; K10 for odd counts.
    corners = [at(high, low), at(low, high), at(low, low), at(high, high)]
    sides = [at(mid, low), at(mid, high), at(high, mid), at(low, mid)]
    tengen = at(mid, mid)
    if stones <= 4:
        return corners[:stones]
    if stones == 5:
        return corners + [tengen]
    if stones == 6:
        return corners + sides[:2]
    if stones == 7:
        return corners + sides[:2] + [tengen]
    if stones == 8:
        return corners + sides
    return corners + sides + [tengen]
