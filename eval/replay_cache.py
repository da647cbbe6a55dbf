"""The analysis engine's memory of replayed games: resume a game instead of replaying it.

A client that analyses a game as it is played (KaTrain, a GUI stepping through
a record) sends the whole move list again with every query, one move longer
each time. Replaying it costs a sequential scan of ``play`` over every move,
most of a 19x19 query's time at one visit. The engine keeps each game's state
after its last move, keyed by everything the state depends on (board size,
rules, move cap, komi, first player, setup stones, moves); a later query
whose moves extend a kept game starts from that state and replays only the
new moves. The state holds the whole history the rules need (ko, superko
keys, past boards, passes), so a resumed game is the same as a replayed one
bit for bit.

Kept states are host (numpy) copies of one game's ``GoState``: a few KB each;
the least recently used ones are dropped beyond ``capacity``.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable
from typing import Any

import numpy as np

_MOVE_BYTES = 4  # one move in a moves key: colour and action as two int16


def moves_key(colours: np.ndarray, actions: np.ndarray) -> bytes:
    """``[T]`` colours and actions as bytes whose first ``4 * k`` are the first ``k`` moves."""
    pairs = np.stack([np.asarray(colours, np.int16), np.asarray(actions, np.int16)], axis=1)
    return pairs.tobytes()


class ReplayCache:
    """Game states after their moves, by game and move list; least recently used out first.

    ``game`` keys are any hashable naming what a state depends on besides its
    moves; ``moves`` keys come from :func:`moves_key`.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, not {capacity}")
        self.capacity = int(capacity)
        self._states: OrderedDict[tuple[Hashable, bytes], Any] = OrderedDict()
        self._lengths: dict[Hashable, Counter] = {}  # per game: how many kept states of each length
        self.hits = 0  # queries that resumed a kept game (for tests and logs)

    def __len__(self) -> int:
        return len(self._states)

    def clear(self) -> None:
        self._states.clear()
        self._lengths.clear()

    def longest(self, game: Hashable, moves: bytes, most: int) -> tuple[int, Any]:
        """The kept state with the most moves, at most ``most``, that ``moves`` begins with:
        ``(its move count, state)``, or ``(0, None)`` if there is none."""
        lengths = self._lengths.get(game)
        if not lengths:
            return 0, None
        most = min(most, len(moves) // _MOVE_BYTES)
        for count in sorted((n for n in lengths if n <= most), reverse=True):
            key = (game, moves[: count * _MOVE_BYTES])
            state = self._states.get(key)
            if state is not None:
                self._states.move_to_end(key)
                self.hits += 1
                return count, state
        return 0, None

    def put(self, game: Hashable, moves: bytes, state: Any) -> None:
        """Keep ``state``, the game ``game`` after ``moves``."""
        if self.capacity == 0:
            return
        key = (game, moves)
        if key in self._states:
            self._states.move_to_end(key)
            self._states[key] = state
            return
        self._states[key] = state
        self._lengths.setdefault(game, Counter())[len(moves) // _MOVE_BYTES] += 1
        while len(self._states) > self.capacity:
            (old_game, old_moves), _ = self._states.popitem(last=False)
            lengths = self._lengths[old_game]
            lengths[len(old_moves) // _MOVE_BYTES] -= 1
            lengths += Counter()  # drops the lengths no state has any more
            if not lengths:
                del self._lengths[old_game]
