"""Read and write SGF (Smart Game Format, FF[4]) records of Go games.

A game record keeps the root node's game information and setup, and the
*main line*: at every branch the first variation. Points are action indices,
``row * size + col`` with row 0 the top line (SGF ``"aa"`` is the top-left
corner, action 0) and ``size * size`` for pass, as everywhere in gojax.

The reader follows the FF[4] grammar exactly::

    Collection = GameTree+          GameTree = "(" Sequence GameTree* ")"
    Sequence   = Node+              Node     = ";" Property*
    Property   = PropIdent PropValue+          PropValue = "[" text "]"

with whitespace allowed between tokens. It also accepts FF[3] identifiers
that mix in lowercase letters (``AddBlack`` reads as ``AB``). Anything it
cannot read exactly raises :class:`SGFError`, whose message names the problem
and where it is (``line L, column C``, 1-based, and for the meaning of a
property the node and move number); no other exception escapes :func:`parse`.

>>> record = parse("(;SZ[9]KM[7];B[cc];W[])")
>>> record.size, record.komi, record.moves
(9, 7.0, [('B', 20), ('W', 81)])
"""

from __future__ import annotations

import bisect
import dataclasses
import decimal
import math
import operator
import os
import re
import tempfile
from collections.abc import Iterable
from typing import NamedTuple

from gojax._coords import MAX_SIZE, MIN_SIZE, action_to_sgf, sgf_to_action
from gojax._setup import repeated_point

__all__ = [
    "GameRecord",
    "Node",
    "SGFError",
    "dumps",
    "load",
    "parse",
    "parse_collection",
    "result_winner",
    "save",
]


class SGFError(ValueError):
    """An SGF text that cannot be read exactly, or a record that cannot be written.

    ``str(error)`` is ``"[path: ]line L, column C: problem"`` when the problem
    has a place in a text (lines and columns 1-based, a column counts
    characters); the parts are also kept as ``message``, ``line``, ``column``
    and ``path`` (``None`` where they do not apply).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.path = path
        text = message
        if line is not None:
            text = f"line {line}, column {column}: {text}"
        if path is not None:
            text = f"{path}: {text}"
        super().__init__(text)

    def __reduce__(self) -> tuple[object, ...]:
        # Keep line, column and path when errors cross process boundaries (data loaders).
        return _make_error, (self.message, self.line, self.column, self.path)

    def with_path(self, path: str | os.PathLike[str]) -> SGFError:
        """The same error, naming the file it came from."""
        return SGFError(self.message, line=self.line, column=self.column, path=os.fspath(path))


def _make_error(message: str, line: int | None, column: int | None, path: str | None) -> SGFError:
    return SGFError(message, line=line, column=column, path=path)


@dataclasses.dataclass(frozen=True)
class Node:
    """One main-line node after the root.

    Setup (``add_*``) and a move should not share a node in FF[4]; where a
    file does it anyway, the setup is meant to be applied before the move.
    """

    color: str | None = None  # "B" or "W" when the node holds a move, else None
    action: int | None = None  # row * size + col, size * size = pass; None without a move
    add_black: tuple[int, ...] = ()  # AB: action indices set to black
    add_white: tuple[int, ...] = ()  # AW: action indices set to white
    add_empty: tuple[int, ...] = ()  # AE: action indices cleared
    comment: str = ""  # C[], unescaped, newlines kept


@dataclasses.dataclass
class GameRecord:
    """A Go game: the root node's information and setup, then the main line.

    Point fields hold action indices (``row * size + col``, row 0 on top);
    text fields hold the unescaped SGF values as written, ``None`` where the
    property is absent.
    """

    size: int = 19  # SZ, board side
    komi: float = 0.0  # KM
    rules: str | None = None  # RU as given, e.g. "Chinese", "Tromp-Taylor"
    handicap: int = 0  # HA
    setup_black: list[int] = dataclasses.field(default_factory=list)  # root AB
    setup_white: list[int] = dataclasses.field(default_factory=list)  # root AW
    setup_empty: list[int] = dataclasses.field(default_factory=list)  # root AE
    player_black: str | None = None  # PB
    player_white: str | None = None  # PW
    result: str | None = None  # RE, e.g. "B+R", "W+3.5", "0"; see result_winner
    date: str | None = None  # DT
    comment: str = ""  # root C
    to_play: str | None = None  # root PL, "B" or "W"
    nodes: list[Node] = dataclasses.field(default_factory=list)  # main line after the root
    # Other root properties (GN, EV, AP, CA, ...) by identifier, values unescaped,
    # kept so that records survive a round trip; never one of the fields above.
    extra: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def moves(self) -> list[tuple[str, int]]:
        """``(color, action)`` of every node that holds a move, in order; passes included."""
        return [(n.color, n.action) for n in self.nodes if n.color is not None]


# ---------------------------------------------------------------------------- syntax

_SPACE = re.compile(r"\s*")
_IDENT = re.compile(r"[A-Za-z]+")
# "[" then any run of plain characters and backslash escapes, then "]". The
# unrolled form never backtracks more than linearly on an unterminated value.
_VALUE = re.compile(r"\[([^\\\]]*(?:\\.[^\\\]]*)*)\]", re.DOTALL)
_ESCAPE = re.compile(r"\\(\r\n|\n\r|\r|\n|.)", re.DOTALL)
_LINE_BREAK = re.compile(r"\r\n|\n\r|\r|\n")
_BREAKS = frozenset(["\r\n", "\n\r", "\r", "\n"])


class _Prop(NamedTuple):
    ident: str  # normalised identifier: its uppercase letters ("AddBlack" -> "AB")
    offset: int  # where the identifier starts in the text
    values: list[str]  # unescaped values
    offsets: list[int]  # where each value's "[" is


_RawNode = dict[str, _Prop]


class _Source:
    """The text being read, to turn offsets into line and column numbers."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts: list[int] | None = None

    def where(self, offset: int) -> tuple[int, int]:
        if self._line_starts is None:
            # Any of \n, \r\n, \n\r, \r ends a line, as in the SGF specification.
            self._line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(self.text)]
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def error(self, offset: int, message: str) -> SGFError:
        line, column = self.where(offset)
        return SGFError(message, line=line, column=column)


def _unescape(raw: str) -> str:
    """Value text as meant: ``\\x`` is ``x``; backslash + line break is removed."""
    if "\\" not in raw:
        return raw
    return _ESCAPE.sub(lambda m: "" if m.group(1) in _BREAKS else m.group(1), raw)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("]", "\\]")


def _parse_node(src: _Source, pos: int) -> tuple[_RawNode, int]:
    """Properties from ``pos`` (just after ``;``) up to the next ``;``, ``(``, ``)``."""
    text, end = src.text, len(src.text)
    node: _RawNode = {}
    while True:
        pos = _SPACE.match(text, pos).end()
        if pos >= end or text[pos] in ";()":
            return node, pos
        match = _IDENT.match(text, pos)
        if match is None:
            char = text[pos]
            if char == "[":
                raise src.error(pos, "value '[...]' without a property identifier")
            raise src.error(pos, f"unexpected character {char!r} outside a property value")
        raw_ident = match.group()
        ident = raw_ident if raw_ident.isupper() else "".join(filter(str.isupper, raw_ident))
        if not ident:
            raise src.error(
                pos,
                f"property identifier {raw_ident!r} has no uppercase letter "
                "(identifiers are uppercase, e.g. 'B', 'AB')",
            )
        start, pos = pos, match.end()
        values: list[str] = []
        offsets: list[int] = []
        while True:
            after_space = _SPACE.match(text, pos).end()
            if after_space >= end or text[after_space] != "[":
                break
            value = _VALUE.match(text, after_space)
            if value is None:
                raise src.error(
                    after_space, f"unterminated value of property {ident} (missing ']')"
                )
            values.append(_unescape(value.group(1)))
            offsets.append(after_space)
            pos = value.end()
        if not values:
            raise src.error(start, f"property {ident} has no value (expected '[')")
        if ident in node:
            first_line, first_column = src.where(node[ident].offset)
            raise src.error(
                start,
                f"property {ident} appears twice in one node "
                f"(first at line {first_line}, column {first_column})",
            )
        node[ident] = _Prop(ident, start, values, offsets)


class _Tree:
    """A game tree being read: where it opened and what it holds so far."""

    __slots__ = ("start", "main", "nodes", "children")

    def __init__(self, start: int, main: bool) -> None:
        self.start = start
        self.main = main  # on the main line: the root tree or a first variation of one
        self.nodes = 0
        self.children = 0


def _parse_game_tree(src: _Source, pos: int) -> tuple[list[_RawNode], int]:
    """The game tree opening at ``pos``: its main line, and the offset after its ``)``.

    Iterative, with an explicit stack, so deeply nested variations cannot hit
    Python's recursion limit.
    """
    text, end = src.text, len(src.text)
    main_line: list[_RawNode] = []
    stack = [_Tree(pos, main=True)]
    pos += 1
    while stack:
        tree = stack[-1]
        pos = _SPACE.match(text, pos).end()
        if pos >= end:
            line, column = src.where(tree.start)
            raise src.error(
                pos,
                f"missing ')' at end of input: the game tree opened at line {line}, "
                f"column {column} is not closed",
            )
        char = text[pos]
        if tree.nodes == 0 and char != ";":
            raise src.error(pos, f"expected ';' to start a node, found {char!r}")
        if char == ";":
            if tree.children:
                raise src.error(pos, "node after a variation: nodes must come before '('")
            node, pos = _parse_node(src, pos + 1)
            tree.nodes += 1
            if tree.main:
                main_line.append(node)
        elif char == "(":
            # Only the first variation of a main-line tree continues the main line;
            # the others are still read so that their syntax errors are reported.
            stack.append(_Tree(pos, main=tree.main and tree.children == 0))
            tree.children += 1
            pos += 1
        elif char == ")":
            stack.pop()
            pos += 1
        else:
            raise src.error(pos, f"unexpected character {char!r} outside a property value")
    return main_line, pos


def _parse_syntax(src: _Source) -> list[list[_RawNode]]:
    """The main line of every game tree of the text."""
    text = src.text
    pos = _SPACE.match(text).end()
    if pos >= len(text):
        raise src.error(pos, "empty input: no game tree (expected '(')")
    trees = []
    while pos < len(text):
        if text[pos] != "(":
            what = "to start a game tree" if not trees else "or end of input after a game tree"
            raise src.error(pos, f"expected '(' {what}, found {text[pos]!r}")
        main_line, pos = _parse_game_tree(src, pos)
        trees.append(main_line)
        pos = _SPACE.match(text, pos).end()
    return trees


# --------------------------------------------------------------------------- meaning

# Root properties that become GameRecord fields (FF is implied by the writer).
_ROOT_FIELDS = frozenset(
    ["FF", "GM", "SZ", "KM", "HA", "RU", "PB", "PW", "RE", "DT", "C", "PL", "AB", "AW", "AE"]
)
_MOVE_PROPS = frozenset(["B", "W"])
_RESERVED = _ROOT_FIELDS | _MOVE_PROPS

_SIZE_VALUE = re.compile(r"\s*0*([0-9]{1,3})\s*(?::\s*0*([0-9]{1,3})\s*)?")
_REAL_VALUE = re.compile(r"\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*")
_INT_VALUE = re.compile(r"\s*\+?0*([0-9]{1,4})\s*")


class _NodeReader:
    """Reads properties of one node, with errors that say which node and property."""

    def __init__(self, src: _Source, node: _RawNode, index: int, moves_before: int) -> None:
        self.src = src
        self.node = node
        holds_move = any(p in node for p in _MOVE_PROPS)
        if index == 0:
            self.label = "node 0 (root" + (f", move {moves_before + 1})" if holds_move else ")")
        elif holds_move:
            self.label = f"node {index} (move {moves_before + 1})"
        else:
            self.label = f"node {index}"

    def error(self, prop: _Prop, message: str, value_index: int | None = None) -> SGFError:
        offset = prop.offset if value_index is None else prop.offsets[value_index]
        return self.src.error(offset, f"{self.label}, property {prop.ident}: {message}")

    def single(self, ident: str) -> str | None:
        prop = self.node.get(ident)
        if prop is None:
            return None
        if len(prop.values) != 1:
            raise self.error(prop, f"takes exactly one value, got {len(prop.values)}")
        return prop.values[0]

    def point(self, prop: _Prop, index: int, point: str, size: int) -> int:
        """A point of a setup list: on the board, not a pass."""
        try:
            action = sgf_to_action(point, size)
        except ValueError as err:
            raise self.error(prop, str(err), index) from None
        if action == size * size:
            raise self.error(prop, f"{point!r} is a pass, not a point", index)
        return action

    def points(self, ident: str, size: int) -> tuple[int, ...]:
        """AB/AW/AE values, with compressed rectangles ``aa:cc`` expanded row by row."""
        prop = self.node.get(ident)
        if prop is None:
            return ()
        actions: list[int] = []
        for index, value in enumerate(prop.values):
            if ":" not in value:
                actions.append(self.point(prop, index, value, size))
                continue
            first, _, last = value.partition(":")
            row0, col0 = divmod(self.point(prop, index, first, size), size)
            row1, col1 = divmod(self.point(prop, index, last, size), size)
            for row in range(min(row0, row1), max(row0, row1) + 1):
                for col in range(min(col0, col1), max(col0, col1) + 1):
                    actions.append(row * size + col)
        return tuple(actions)

    def setup(self, size: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        if "AB" not in self.node and "AW" not in self.node and "AE" not in self.node:
            return (), (), ()  # the common case, kept cheap for large collections
        idents = ("AB", "AW", "AE")
        result = tuple(self.points(ident, size) for ident in idents)
        # A point set up twice has no defined meaning (FF[4] forbids it): the check
        # every setup shares (gojax._setup), reported here where the text says it.
        repeat = repeated_point(action for actions in result for action in actions)
        if repeat is not None:
            for ident, actions in zip(idents, result, strict=True):
                if repeat < len(actions):
                    point = action_to_sgf(actions[repeat], size)
                    raise self.error(self.node[ident], f"point {point!r} is set up twice")
                repeat -= len(actions)
        return result

    def move(self, size: int) -> tuple[str | None, int | None]:
        props = [self.node[c] for c in ("B", "W") if c in self.node]
        if not props:
            return None, None
        if len(props) == 2:
            later = max(props, key=lambda p: p.offset)
            raise self.error(later, "a node holds both B and W")
        prop = props[0]
        value = self.single(prop.ident)
        try:
            return prop.ident, sgf_to_action(value, size)
        except ValueError as err:
            raise self.error(prop, str(err), 0) from None


def _read_size(reader: _NodeReader) -> int:
    value = reader.single("SZ")
    if value is None:
        return 19
    prop = reader.node["SZ"]
    match = _SIZE_VALUE.fullmatch(value)
    if match is None:
        raise reader.error(prop, f"bad board size {value!r}: expected an integer", 0)
    size = int(match.group(1))
    if match.group(2) is not None and int(match.group(2)) != size:
        raise reader.error(prop, f"rectangular boards are not supported (SZ[{value}])", 0)
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise reader.error(prop, f"board size {size} is outside {MIN_SIZE}..{MAX_SIZE}", 0)
    return size


def _build_record(src: _Source, nodes: list[_RawNode]) -> GameRecord:
    root = _NodeReader(src, nodes[0], 0, 0)
    game = root.single("GM")
    if game is not None and game.strip() != "1":
        raise root.error(root.node["GM"], f"not a Go game (GM[{game}])", 0)
    # SZ first: setup points in the root can only be read once the size is known.
    size = _read_size(root)
    record = GameRecord(size=size)

    komi = root.single("KM")
    if komi is not None:
        match = _REAL_VALUE.fullmatch(komi)
        if match is None:
            raise root.error(root.node["KM"], f"bad komi {komi!r}: expected a number", 0)
        record.komi = float(match.group(1))
    handicap = root.single("HA")
    if handicap is not None:
        match = _INT_VALUE.fullmatch(handicap)
        if match is None:
            raise root.error(root.node["HA"], f"bad handicap {handicap!r}: expected an integer", 0)
        record.handicap = int(match.group(1))
    player = root.single("PL")
    if player is not None:
        if player.strip().upper() not in ("B", "W"):
            raise root.error(root.node["PL"], f"bad player {player!r}: expected 'B' or 'W'", 0)
        record.to_play = player.strip().upper()
    record.rules = root.single("RU")
    record.player_black = root.single("PB")
    record.player_white = root.single("PW")
    record.result = root.single("RE")
    record.date = root.single("DT")
    record.comment = root.single("C") or ""
    black, white, empty = root.setup(size)
    record.setup_black = list(black)
    record.setup_white = list(white)
    record.setup_empty = list(empty)
    record.extra = {
        ident: list(prop.values) for ident, prop in root.node.items() if ident not in _RESERVED
    }

    # A move in the root (allowed, if unusual) becomes the first main-line node:
    # the root's setup still comes first, as SGF applies setup before the move.
    color, action = root.move(size)
    moves = 0
    if color is not None:
        record.nodes.append(Node(color=color, action=action))
        moves = 1
    for index, raw in enumerate(nodes[1:], start=1):
        reader = _NodeReader(src, raw, index, moves)
        color, action = reader.move(size)
        moves += color is not None
        black, white, empty = reader.setup(size)
        record.nodes.append(
            Node(
                color=color,
                action=action,
                add_black=black,
                add_white=white,
                add_empty=empty,
                comment=reader.single("C") or "",
            )
        )
    return record


def _records(text: str, first_only: bool) -> list[GameRecord]:
    if not isinstance(text, str):
        raise SGFError(f"expected SGF text as str, got {type(text).__name__}")
    # A byte-order mark is not SGF but editors put one in front of UTF-8 files.
    src = _Source(text[1:] if text.startswith("\ufeff") else text)
    trees = _parse_syntax(src)
    if first_only:
        trees = trees[:1]
    return [_build_record(src, main_line) for main_line in trees]


def parse(text: str) -> GameRecord:
    """The first game tree of an SGF text (the whole text must be valid SGF).

    >>> parse("(;SZ[9]AB[aa:bb](;W[ia])(;W[ii]))").setup_black, parse("(;SZ[9];W[ia])").moves
    ([0, 1, 9, 10], [('W', 8)])
    """
    try:
        return _records(text, first_only=True)[0]
    except SGFError:
        raise
    except Exception as err:  # a bug here must still surface as an SGF problem
        raise SGFError(f"internal error while reading SGF: {err!r}") from err


def parse_collection(text: str) -> list[GameRecord]:
    """Every game tree of an SGF text, in order."""
    try:
        return _records(text, first_only=False)
    except SGFError:
        raise
    except Exception as err:  # a bug here must still surface as an SGF problem
        raise SGFError(f"internal error while reading SGF: {err!r}") from err


# ---------------------------------------------------------------------------- files

_CHARSET = re.compile(rb"(?<![A-Za-z])CA\s*\[([^\]\\]*)\]")


def _decode(data: bytes) -> str:
    """Bytes → text: as the CA[] property says, else UTF-8, else Latin-1 (never fails)."""
    candidates = []
    match = _CHARSET.search(data)
    if match is not None:
        candidates.append(match.group(1).decode("ascii", "replace").strip())
    candidates += ["utf-8-sig", "latin-1"]
    for name in candidates:
        try:
            return data.decode(name)
        except (LookupError, UnicodeDecodeError):
            continue
    raise AssertionError("unreachable: latin-1 decodes any bytes")


def load(path: str | os.PathLike[str]) -> GameRecord:
    """Read the first game of an SGF file; a parse error names the file.

    The bytes are decoded as the file's ``CA[]`` says, else as UTF-8, falling
    back to Latin-1 when that fails. A missing file raises ``OSError``.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        return parse(_decode(data))
    except SGFError as err:
        raise err.with_path(path) from None


def save(record: GameRecord, path: str | os.PathLike[str]) -> None:
    """Write ``dumps(record)`` to ``path`` atomically.

    The text goes to a temporary file in the same folder that then replaces
    ``path`` in one step, so readers see the old file or the new one, never a
    part. It is encoded as ``record.extra["CA"]`` names (UTF-8 without one);
    text that encoding cannot hold raises :class:`SGFError`.
    """
    text = dumps(record)
    charset = record.extra.get("CA", ["UTF-8"])[0].strip()
    try:
        data = text.encode(charset)
    except LookupError:
        raise SGFError(f"unknown character set CA[{charset}]", path=os.fspath(path)) from None
    except UnicodeEncodeError as err:
        raise SGFError(
            f"the record has text that CA[{charset}] cannot encode: {err}", path=os.fspath(path)
        ) from None
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private (0600); a game record is an ordinary file.
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


# --------------------------------------------------------------------------- writing

_NODES_PER_LINE = 10


def _format_komi(komi: float) -> str:
    if not math.isfinite(komi):
        raise SGFError(f"cannot write komi {komi!r}: it must be a finite number")
    if float(komi).is_integer():
        return str(int(komi))
    # Positional notation (the reader takes no exponent), exact for the shortest repr.
    return format(decimal.Decimal(repr(float(komi))), "f")


def _index(value: object, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise SGFError(f"cannot write {what}: {value!r} is not an integer") from None


def _write_points(ident: str, actions: Iterable[int], size: int, what: str) -> str:
    out = []
    for value in actions:
        action = _index(value, what)
        if not 0 <= action < size * size:
            raise SGFError(f"cannot write {what}: action {action} is off a {size}x{size} board")
        out.append(f"[{action_to_sgf(action, size)}]")
    return f"{ident}{''.join(out)}" if out else ""


def _write_setup(black, white, empty, size: int, where: str) -> str:
    parts = []
    written: list[int] = []
    for ident, field, actions in (
        ("AB", "add_black", black),
        ("AW", "add_white", white),
        ("AE", "add_empty", empty),
    ):
        actions = list(actions)
        parts.append(_write_points(ident, actions, size, f"{where} {field}"))
        written += [operator.index(action) for action in actions]
    repeat = repeated_point(written)
    if repeat is not None:
        raise SGFError(f"cannot write {where}: action {written[repeat]} is set up twice")
    return "".join(parts)


def _write_node(node: Node, size: int, number: int) -> str:
    where = f"node {number}"
    parts = [";", _write_setup(node.add_black, node.add_white, node.add_empty, size, where)]
    if node.color is None:
        if node.action is not None:
            raise SGFError(f"cannot write {where}: action {node.action} without a color")
    else:
        if node.color not in ("B", "W"):
            raise SGFError(f"cannot write {where}: color {node.color!r} is not 'B' or 'W'")
        action = _index(node.action, f"{where} action")
        if not 0 <= action <= size * size:
            raise SGFError(f"cannot write {where}: action {action} is off a {size}x{size} board")
        # Pass as B[] (FF[4]); "tt" would be a point on boards above 19x19.
        parts.append(f"{node.color}[{action_to_sgf(action, size)}]")
    if node.comment:
        parts.append(f"C[{_escape(node.comment)}]")
    return "".join(parts)


def dumps(record: GameRecord) -> str:
    """The record as FF[4] SGF text; ``parse(dumps(record)) == record``.

    Deterministic: the root (``FF[4]GM[1]SZ[..]KM[..]``, then the other game
    information, ``extra`` sorted by identifier, setup and comment), then one
    node per move, ten nodes a line. Passes are written ``B[]``/``W[]``;
    values escape ``\\`` and ``]``. An inconsistent record raises SGFError.
    """
    size = _index(record.size, "size")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise SGFError(f"cannot write board size {size}: outside {MIN_SIZE}..{MAX_SIZE}")
    handicap = _index(record.handicap, "handicap")
    if handicap < 0:
        raise SGFError(f"cannot write handicap {handicap}: it must not be negative")
    root = [f"(;FF[4]GM[1]SZ[{size}]KM[{_format_komi(record.komi)}]"]
    if handicap:
        root.append(f"HA[{handicap}]")
    for ident, value in (
        ("RU", record.rules),
        ("PB", record.player_black),
        ("PW", record.player_white),
        ("DT", record.date),
        ("RE", record.result),
    ):
        if value is not None:
            root.append(f"{ident}[{_escape(value)}]")
    if record.to_play is not None:
        if record.to_play not in ("B", "W"):
            raise SGFError(f"cannot write to_play {record.to_play!r}: not 'B' or 'W'")
        root.append(f"PL[{record.to_play}]")
    for ident in sorted(record.extra):
        values = record.extra[ident]
        if not re.fullmatch(r"[A-Z]+", ident) or ident in _RESERVED:
            raise SGFError(f"cannot write extra property {ident!r}: not an identifier of its own")
        if isinstance(values, str) or not values:
            raise SGFError(f"cannot write extra property {ident}: needs a list of values")
        root.append(ident + "".join(f"[{_escape(v)}]" for v in values))
    root.append(
        _write_setup(record.setup_black, record.setup_white, record.setup_empty, size, "root")
    )
    if record.comment:
        root.append(f"C[{_escape(record.comment)}]")

    lines = ["".join(root)]
    nodes = [_write_node(node, size, i) for i, node in enumerate(record.nodes, start=1)]
    for start in range(0, len(nodes), _NODES_PER_LINE):
        lines.append("".join(nodes[start : start + _NODES_PER_LINE]))
    return "\n".join(lines) + ")\n"


def result_winner(result: str | None) -> int | None:
    """Winner of an RE value: +1 Black (``"B+R"``, ``"B+3.5"``), -1 White, 0 draw, else None.

    ``"0"``, ``"Draw"`` (any case) and ``"Jigo"`` are draws; ``"Void"``,
    ``"?"``, an empty value and ``None`` give ``None``.

    >>> result_winner("B+R"), result_winner("W+0.5"), result_winner("Draw"), result_winner("?")
    (1, -1, 0, None)
    """
    if result is None:
        return None
    text = result.strip().upper()
    if text.startswith("B+"):
        return 1
    if text.startswith("W+"):
        return -1
    if text in ("0", "DRAW", "JIGO"):
        return 0
    return None
