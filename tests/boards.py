"""Test helpers: positions drawn as ASCII, GTP move lists, and a pure-NumPy Go reference.

Drawings put the top line first, as gojax's action indices do (row 0 on top):

    position('''
        . X O .
        X O . O
        . X O .
        . . . .
    ''', to_play="B", rules="chinese")

``X`` is Black, ``O`` White, ``.`` (or ``+``) an empty point; spaces between
points are optional. GTP vertices count rows from the *bottom*, so on this
4x4 drawing the top line is row 4 and its left point is ``A4``.

The reference engine (:func:`chains`, :func:`ref_play`, :class:`RefGame`)
knows nothing of gojax's incremental chain labels, liberty counts or hashes:
it flood-fills chains from the stones and keeps the positions seen as bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import textwrap
from collections.abc import Iterable

import jax
import numpy as np

import gojax

BLACK, WHITE, EMPTY = 1, -1, 0
_SYMBOL_VALUES = {"X": BLACK, "O": WHITE, ".": EMPTY, "+": EMPTY}
_VALUE_SYMBOLS = {BLACK: "X", WHITE: "O", EMPTY: "."}

# XLA's optimisations cost most of the compile time of these small programs
# and buy little at test sizes; the suite compiles one program per board size
# and rule set. Option names vary between XLA versions: use the first set this
# one accepts.
_COMPILE_OPTION_CANDIDATES = (
    {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False},
    {"xla_backend_optimization_level": 0},
)


def _first_accepted_options() -> dict | None:
    if "compiler_options" not in inspect.signature(jax.jit).parameters:
        return None
    for options in _COMPILE_OPTION_CANDIDATES:
        try:
            jax.jit(lambda x: x + 1).lower(np.int32(0)).compile(options)
        except Exception:  # an option this XLA does not know
            continue
        return options
    return None


FAST_COMPILE = _first_accepted_options()


def fast_jit(fun, **kwargs):
    """``jax.jit`` with cheap compilation options where this jax accepts them."""
    if FAST_COMPILE is not None:
        kwargs["compiler_options"] = FAST_COMPILE
    return jax.jit(fun, **kwargs)


# Jitted once for the whole test session; jit caches one program per board
# size, rule set and move cap (all static in the state's treedef).
jit_play = fast_jit(gojax.play)
jit_legal = fast_jit(gojax.legal_moves)


@functools.cache
def _constructor(size: int, rules: str, max_moves: int | None, history: int):
    def build(komi, board, to_play):
        return gojax.new_game(
            size,
            komi=komi,
            rules=rules,
            max_moves=max_moves,
            history=history,
            board=board,
            to_play=to_play,
        )

    return fast_jit(build)


def new_game(
    size: int,
    *,
    komi: float = 7.5,
    rules: str = "tromp-taylor",
    max_moves: int | None = None,
    history: int = 7,
    board=None,
    to_play: int = BLACK,
) -> gojax.GoState:
    """:func:`gojax.new_game` through a jitted constructor cached per static configuration.

    Built eagerly, a new game compiles a few dozen small programs for every
    board size; the tests build many positions.
    """
    if board is None:
        board = np.zeros(size * size, np.int8)
    board = np.asarray(board, np.int8).reshape(size * size)
    build = _constructor(size, gojax.get_rules(rules).name, max_moves, history)
    return build(np.float32(komi), board, np.int8(to_play))


# ----------------------------------------------------------------------------
# Drawings.


def parse_board(text: str) -> np.ndarray:
    """A drawing → ``[N, N]`` int8 board (+1 black, -1 white, 0 empty)."""
    rows = [line.replace(" ", "") for line in textwrap.dedent(text).strip().splitlines()]
    rows = [row for row in rows if row]
    size = len(rows)
    if any(len(row) != size for row in rows):
        raise ValueError(f"drawing is not square: {rows}")
    try:
        return np.array([[_SYMBOL_VALUES[ch] for ch in row] for row in rows], np.int8)
    except KeyError as err:
        raise ValueError(f"unknown point symbol {err} in drawing") from None


def color_value(color: str | int) -> int:
    """``"B"``/``"black"``/``+1`` → +1; ``"W"``/``"white"``/``-1`` → -1."""
    if isinstance(color, str):
        key = color.strip().upper()[:1]
        if key not in ("B", "W"):
            raise ValueError(f"not a colour: {color!r}")
        return BLACK if key == "B" else WHITE
    if int(color) not in (BLACK, WHITE):
        raise ValueError(f"not a colour: {color!r}")
    return int(color)


def position(
    text: str,
    *,
    to_play: str | int = "B",
    rules: str = "tromp-taylor",
    komi: float = 7.5,
    max_moves: int | None = None,
) -> gojax.GoState:
    """A :class:`gojax.GoState` set up from a drawing."""
    board = parse_board(text)
    return new_game(
        board.shape[0],
        komi=komi,
        rules=rules,
        max_moves=max_moves,
        board=board.reshape(-1),
        to_play=color_value(to_play),
    )


def drawing(text: str) -> str:
    """A drawing in the canonical form :func:`ascii_of` prints (points separated by spaces)."""
    board = parse_board(text)
    return "\n".join(" ".join(_VALUE_SYMBOLS[int(v)] for v in row) for row in board)


def ascii_of(state_or_board) -> str:
    """The board of a state (or a flat / square board array) as a canonical drawing."""
    board = getattr(state_or_board, "board", state_or_board)
    board = np.asarray(board)
    size = math.isqrt(board.size)
    board = board.reshape(size, size)
    return "\n".join(" ".join(_VALUE_SYMBOLS[int(v)] for v in row) for row in board)


# ----------------------------------------------------------------------------
# Moves by GTP vertex.


def _parse_moves(moves) -> list[tuple[int | None, str]]:
    """``"B C3", "W pass"``, ``"C3 D4"``, ``["B C3", ("W", "D4")]`` → ``[(colour, vertex)]``.

    The colour is None where the move list leaves it to the turn order.
    """
    out: list[tuple[int | None, str]] = []
    for item in moves:
        if isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[1], str):
            out.append((color_value(item[0]), item[1]))
            continue
        if not isinstance(item, str):
            out.extend(_parse_moves(item))
            continue
        tokens = item.replace(",", " ").split()
        colour: int | None = None
        for token in tokens:
            if token.upper() in ("B", "W", "BLACK", "WHITE"):
                colour = color_value(token)
            else:
                out.append((colour, token))
                colour = None
    return out


def play_moves(state: gojax.GoState, *moves, check_legal: bool = True) -> gojax.GoState:
    """Play GTP moves: ``play_moves(s, "B C3", "W pass")``, ``play_moves(s, "C3 D4")``, lists.

    A colour given with a vertex must be the player to move. With ``check_legal``
    each move must be in :func:`gojax.legal_moves` before it is played.
    """
    size = state.size
    for colour, vertex in _parse_moves(moves):
        to_play = int(state.to_play)
        if colour is not None and colour != to_play:
            raise AssertionError(f"{vertex}: {'BW'[colour == WHITE]} moves but not to play")
        action = gojax.gtp_to_action(vertex, size)
        if check_legal and not bool(jit_legal(state)[action]):
            raise AssertionError(
                f"{'BW'[to_play == WHITE]} {vertex} is illegal in\n{ascii_of(state)}"
            )
        state = jit_play(state, action)
    return state


def legal_vertices(state: gojax.GoState) -> set[str]:
    """The legal moves of the player to move as GTP vertices (pass as ``"pass"``)."""
    mask = np.asarray(jit_legal(state))
    return {gojax.action_to_gtp(int(a), state.size) for a in np.flatnonzero(mask)}


def empty_vertices(state: gojax.GoState) -> set[str]:
    """Every empty point as a GTP vertex."""
    board = np.asarray(state.board)
    return {gojax.action_to_gtp(int(a), state.size) for a in np.flatnonzero(board == EMPTY)}


def vertices(text: str) -> set[str]:
    """``"A1 B2 pass"`` → ``{"A1", "B2", "pass"}`` (upper-case points, lower-case pass)."""
    return {v if v.lower() == "pass" else v.upper() for v in text.split()}


def stones(state_or_board, color: str | int) -> set[str]:
    """The points holding ``color``'s stones, as GTP vertices."""
    board = np.asarray(getattr(state_or_board, "board", state_or_board)).reshape(-1)
    size = math.isqrt(board.size)
    value = color_value(color)
    return {gojax.action_to_gtp(int(a), size) for a in np.flatnonzero(board == value)}


# ----------------------------------------------------------------------------
# Pure-NumPy reference rules.


@functools.cache
def neighbors(size: int) -> tuple[tuple[int, ...], ...]:
    """The orthogonal neighbours of each point (row-major, row 0 on top)."""
    out = []
    for point in range(size * size):
        row, col = divmod(point, size)
        near = []
        if row > 0:
            near.append(point - size)
        if row < size - 1:
            near.append(point + size)
        if col > 0:
            near.append(point - 1)
        if col < size - 1:
            near.append(point + 1)
        out.append(tuple(near))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Chain:
    color: int
    stones: tuple[int, ...]
    liberties: frozenset[int]


def chains(board, size: int | None = None) -> tuple[list[int], list[Chain]]:
    """Flood fill: ``(label per point, -1 if empty; the chains)``."""
    cells = [int(v) for v in np.asarray(board).reshape(-1)]
    if size is None:
        size = math.isqrt(len(cells))
    nbrs = neighbors(size)
    label = [-1] * len(cells)
    found: list[Chain] = []
    for start, color in enumerate(cells):
        if color == EMPTY or label[start] >= 0:
            continue
        index = len(found)
        label[start] = index
        stack, members, libs = [start], [], set()
        while stack:
            point = stack.pop()
            members.append(point)
            for near in nbrs[point]:
                value = cells[near]
                if value == EMPTY:
                    libs.add(near)
                elif value == color and label[near] < 0:
                    label[near] = index
                    stack.append(near)
        found.append(Chain(color, tuple(sorted(members)), frozenset(libs)))
    return label, found


@dataclasses.dataclass(frozen=True)
class MoveResult:
    board: np.ndarray  # [P] int8, the position after the move
    captured: tuple[int, ...]  # opponent stones removed
    suicided: tuple[int, ...]  # the mover's stones removed (the played point included)
    ko: int  # simple-ko point the move creates, -1 if none


def ref_play(board, size: int, action: int, color: int) -> MoveResult:
    """Place ``color`` at ``action`` (must be empty), capture, then remove the mover if dead."""
    board = np.asarray(board, np.int8).reshape(-1).copy()
    if action == size * size:
        return MoveResult(board, (), (), -1)
    if board[action] != EMPTY:
        raise ValueError(f"point {action} is occupied")
    board[action] = color
    label, found = chains(board, size)
    captured: list[int] = []
    for near in neighbors(size)[action]:
        if board[near] == -color and not found[label[near]].liberties:
            captured.extend(found[label[near]].stones)
    captured = sorted(set(captured))
    board[captured] = EMPTY
    own = chains(board, size)[1]
    mine = next(c for c in own if action in c.stones)
    suicided: tuple[int, ...] = ()
    if not mine.liberties:
        suicided = mine.stones
        board[list(suicided)] = EMPTY
    ko = -1
    if len(captured) == 1 and len(mine.stones) == 1 and len(mine.liberties) == 1:
        ko = captured[0]
    return MoveResult(board, tuple(captured), suicided, ko)


def ref_legal(
    board,
    size: int,
    color: int,
    *,
    ko_point: int = -1,
    multi_stone_suicide: bool = False,
    banned_after=None,
) -> np.ndarray:
    """``[P + 1]`` bool legal moves by the plain definition.

    Empty, not the simple-ko point, not single-stone suicide, not multi-stone
    suicide unless allowed, and not a move whose resulting board
    ``banned_after(board)`` rejects (superko); pass is always legal.
    """
    board = np.asarray(board, np.int8).reshape(-1)
    p = size * size
    label, found = chains(board, size)
    nbrs = neighbors(size)
    legal = np.zeros(p + 1, bool)
    legal[p] = True
    for point in range(p):
        if board[point] != EMPTY or point == ko_point:
            continue
        near = nbrs[point]
        caught = {label[n] for n in near if board[n] == -color}
        caught = {c for c in caught if found[c].liberties == {point}}
        own = {label[n] for n in near if board[n] == color}
        has_empty = any(board[n] == EMPTY for n in near)
        safe = any(found[c].liberties != {point} for c in own)
        after = None
        if caught or has_empty or safe:
            if banned_after is not None:
                after = board.copy()
                after[point] = color
                for c in caught:
                    after[list(found[c].stones)] = EMPTY
        else:  # suicide
            if not own or not multi_stone_suicide:
                continue
            if banned_after is not None:
                after = board.copy()
                for c in own:
                    after[list(found[c].stones)] = EMPTY
        if after is not None and banned_after(after):
            continue
        legal[point] = True
    return legal


KO_RULES = {
    "tromp-taylor": ("positional", True),
    "chinese": ("simple", False),
    "chinese-ogs": ("positional", False),
    "aga": ("situational", False),
    "new-zealand": ("situational", True),
}


class RefGame:
    """A whole game under one preset, by the reference rules."""

    def __init__(self, size: int, rules: str, *, board=None, to_play: int = BLACK, max_moves=None):
        self.size = size
        self.ko_rule, self.multi_stone_suicide = KO_RULES[rules]
        self.board = (
            np.zeros(size * size, np.int8)
            if board is None
            else np.asarray(board, np.int8).reshape(-1).copy()
        )
        self.to_play = to_play
        self.ko = -1
        self.passes = 0
        self.moves = 0
        self.max_moves = 2 * size * size if max_moves is None else max_moves
        self.terminated = False
        self.captures = [0, 0]
        self.seen: set = {self._key(self.board, to_play)}

    def _key(self, board: np.ndarray, to_play: int):
        if self.ko_rule == "situational":
            return (board.tobytes(), to_play)
        return board.tobytes()

    def legal(self) -> np.ndarray:
        if self.terminated:
            return np.zeros(self.size * self.size + 1, bool)
        banned = None
        if self.ko_rule != "simple":
            banned = lambda after: self._key(after, -self.to_play) in self.seen
        return ref_legal(
            self.board,
            self.size,
            self.to_play,
            ko_point=self.ko,
            multi_stone_suicide=self.multi_stone_suicide,
            banned_after=banned,
        )

    def play(self, action: int) -> MoveResult:
        if self.terminated:
            return MoveResult(self.board.copy(), (), (), self.ko)
        result = ref_play(self.board, self.size, action, self.to_play)
        self.board = result.board
        mover = 0 if self.to_play == BLACK else 1
        self.captures[mover] += len(result.captured)
        self.captures[1 - mover] += len(result.suicided)  # the placed stone too, as KataGo
        self.ko = result.ko
        self.passes = self.passes + 1 if action == self.size * self.size else 0
        self.moves += 1
        self.to_play = -self.to_play
        self.seen.add(self._key(self.board, self.to_play))
        self.terminated = self.passes >= 2 or self.moves >= self.max_moves
        return result


def tromp_taylor_area(board, size: int | None = None) -> tuple[int, int]:
    """(black, white): stones plus empty regions that border only that colour."""
    cells = np.asarray(board).reshape(-1)
    if size is None:
        size = math.isqrt(cells.size)
    nbrs = neighbors(size)
    black = int(np.sum(cells == BLACK))
    white = int(np.sum(cells == WHITE))
    seen = set()
    for start in range(cells.size):
        if cells[start] != EMPTY or start in seen:
            continue
        region, borders, stack = 0, set(), [start]
        seen.add(start)
        while stack:
            point = stack.pop()
            region += 1
            for near in nbrs[point]:
                if cells[near] == EMPTY:
                    if near not in seen:
                        seen.add(near)
                        stack.append(near)
                else:
                    borders.add(int(cells[near]))
        if borders == {BLACK}:
            black += region
        elif borders == {WHITE}:
            white += region
    return black, white


def actions_of(moves: Iterable[str], size: int) -> list[int]:
    """GTP vertices → action indices."""
    return [gojax.gtp_to_action(v, size) for _, v in _parse_moves(list(moves))]


def long_ladder(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``([P], [P])`` int8 boards: a white stone in the centre in a ladder that runs to both
    corners (Black to play laddering it), and the same with a breaker on each staircase."""
    board = np.zeros(size * size, np.int8)
    centre = size // 2
    board[centre * size + centre] = WHITE
    board[centre * size + centre - 1] = BLACK
    board[(centre + 1) * size + centre] = BLACK
    board[(centre - 1) * size + centre + 1] = BLACK
    broken = board.copy()
    broken[3 * size + 3] = WHITE  # on the up-left staircase
    broken[(size - 4) * size + size - 4] = WHITE  # on the down-right staircase
    return board, broken
