"""Point naming: action indices, GTP vertices and SGF coordinates.

An action index is ``row * size + col`` with row 0 the *top* line (as SGF and
KataGo's raw output print boards); ``size * size`` is pass.

GTP vertices name columns ``A``..``T`` without ``I`` and rows ``1``..``size``
from the *bottom*, so ``A1`` is the bottom-left corner.
"""

from __future__ import annotations

GTP_COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"  # no "I", as in GTP
# Board sides the whole project supports (rules, SGF, GTP, pictures); GTP's columns end at 25.
MIN_SIZE, MAX_SIZE = 2, len(GTP_COLUMNS)


def pass_action(size: int) -> int:
    """The pass action for a board of side ``size``."""
    return size * size


def action_to_gtp(action: int, size: int) -> str:
    """``action`` (``row * size + col``, row 0 on top) → GTP vertex (``"D4"``, ``"pass"``)."""
    if action == size * size:
        return "pass"
    if not 0 <= action < size * size:
        raise ValueError(f"action {action} is off a {size}x{size} board")
    row, col = divmod(action, size)
    return f"{GTP_COLUMNS[col]}{size - row}"


def gtp_to_action(vertex: str, size: int) -> int:
    """GTP vertex → action index; ``"pass"`` → ``size * size``.

    >>> gtp_to_action("A1", 9), gtp_to_action("J9", 9), gtp_to_action("pass", 9)
    (72, 8, 81)
    """
    text = vertex.strip().upper()
    if text == "PASS":
        return size * size
    if len(text) < 2 or text[0] not in GTP_COLUMNS or not text[1:].isdigit():
        raise ValueError(f"malformed vertex {vertex!r}")
    col = GTP_COLUMNS.index(text[0])
    number = int(text[1:])
    if col >= size or not 1 <= number <= size:
        raise ValueError(f"vertex {vertex!r} is off a {size}x{size} board")
    return (size - number) * size + col


def action_to_sgf(action: int, size: int) -> str:
    """Action → SGF point (``"aa"`` is the top-left); pass → ``""``."""
    if action == size * size:
        return ""
    row, col = divmod(action, size)
    return "abcdefghijklmnopqrstuvwxyz"[col] + "abcdefghijklmnopqrstuvwxyz"[row]


def sgf_to_action(point: str, size: int) -> int:
    """SGF point → action; ``""`` and, on boards up to 19×19, ``"tt"`` are pass."""
    if point == "" or (point == "tt" and size <= 19):
        return size * size
    letters = "abcdefghijklmnopqrstuvwxyz"
    if len(point) != 2 or point[0] not in letters or point[1] not in letters:
        raise ValueError(f"malformed SGF point {point!r}")
    col, row = letters.index(point[0]), letters.index(point[1])
    if col >= size or row >= size:
        raise ValueError(f"SGF point {point!r} is off a {size}x{size} board")
    return row * size + col
