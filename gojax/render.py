"""Human-readable pictures of a Go position: a text "showboard" and an SVG diagram.

Encodings shared by every function here:

* ``board``: ``[size * size]`` integers (numpy or JAX array; a ``[size, size]``
  array is flattened), ``+1`` black, ``-1`` white, ``0`` empty.
* action index: ``row * size + col`` with row 0 the *top* line; ``size * size``
  is pass. Where a position has "no move" (a fresh game, no ko) JAX states
  cannot hold ``None``, so a negative action is read as "none" as well.
* GTP coordinates: columns ``A``.. without ``I`` left to right, rows numbered
  ``size``..``1`` top to bottom, so ``A1`` is the bottom-left corner.

Only numpy and the standard library are used, so rendering never triggers a
JAX compilation or a device transfer beyond one ``np.asarray``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from xml.sax.saxutils import escape

import numpy as np
from numpy.typing import ArrayLike

from gojax._coords import GTP_COLUMNS, MAX_SIZE, MIN_SIZE, action_to_gtp

__all__ = ["board_to_svg", "board_to_text", "save_svg", "state_to_svg", "state_to_text"]

HEATMAP_KINDS = ("ownership", "policy")

# Colours of the SVG diagram.
_WOOD = "#dcb35c"
_INK = "#2b1d0e"  # grid lines, star points and coordinates: dark brown reads softer than black
_BLACK_STONE = "#111111"
_WHITE_STONE = "#f7f7f2"
_POLICY_COLOUR = "#d0342c"
# Heat squares never go fully opaque so the grid and stones underneath stay legible.
_MAX_HEAT_OPACITY = 0.85


# --------------------------------------------------------------------------- helpers


def _check_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer):
        raise ValueError(f"size must be an int, got {size!r}")
    size = int(size)
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"size must be in {MIN_SIZE}..{MAX_SIZE}, got {size}")
    return size


def _as_board(board: ArrayLike, size: int) -> np.ndarray:
    """Validate ``board`` and return it as a flat ``int8[size * size]`` copy."""
    arr = np.asarray(board)
    flat = arr.reshape(-1)
    if flat.shape[0] != size * size:
        raise ValueError(
            f"board has {flat.shape[0]} points (shape {arr.shape}), "
            f"expected {size * size} for a {size}x{size} board"
        )
    if flat.dtype == np.bool_ or not np.issubdtype(flat.dtype, np.number):
        raise ValueError(f"board must hold numbers, got dtype {flat.dtype}")
    if np.issubdtype(flat.dtype, np.inexact) and not np.all(np.isfinite(flat)):
        raise ValueError("board contains NaN or infinite values")
    if not np.all(np.isin(flat, (-1, 0, 1))):
        bad = np.unique(flat[~np.isin(flat, (-1, 0, 1))])[:5]
        raise ValueError(f"board values must be -1, 0 or +1; found {bad.tolist()}")
    return flat.astype(np.int8)


def _point_or_none(action: int | None, size: int, what: str, *, allow_pass: bool) -> int | None:
    """Normalise an optional action: ``None``/negative → ``None``; checks the range.

    Returns ``size * size`` for pass when ``allow_pass``; otherwise pass also
    reads as ``None`` (a ko or a marker cannot sit on "pass").
    """
    if action is None:
        return None
    action = int(action)
    if action < 0:
        return None
    if action == size * size:
        return action if allow_pass else None
    if action > size * size:
        raise ValueError(f"{what} {action} is off a {size}x{size} board")
    return action


def _star_points(size: int) -> frozenset[int]:
    """Hoshi as action indices.

    9x9 gets the 3-3 points and tengen, 13x13 the 4-4 points and tengen, 19x19
    the nine traditional points. Other sizes from 7 up follow the same rule
    (3-3 corners below 13, 4-4 from 13 up; tengen on odd sizes; side points on
    odd sizes from 15 up, where the gap between corners is wide enough);
    boards smaller than 7 are too cramped for hoshi to mean anything.
    """
    if size < 7:
        return frozenset()
    near = 2 if size < 13 else 3
    far = size - 1 - near
    lines = [near, far]
    points = {(r, c) for r in lines for c in lines}
    if size % 2 == 1:
        mid = size // 2
        points.add((mid, mid))
        if size >= 15:
            points |= {(mid, near), (mid, far), (near, mid), (far, mid)}
    return frozenset(r * size + c for r, c in points)


# --------------------------------------------------------------------------- text


def board_to_text(
    board: ArrayLike,
    *,
    size: int,
    to_play: int | None = None,
    last_move: int | None = None,
    ko: int | None = None,
    komi: float | None = None,
    move_number: int | None = None,
    captures: tuple[int, int] | None = None,
) -> str:
    """Render a position as a GnuGo/KataGo-style "showboard" string.

    Args:
      board: ``[size * size]`` ints, ``+1`` black, ``-1`` white, ``0`` empty.
      size: board side, 2..25.
      to_play: ``+1`` black or ``-1`` white; adds ``Black to play``.
      last_move: action index (``size * size`` = pass, ``None``/negative = none);
        the stone is drawn as ``(X)``, and a ``Last move: D4`` line is added.
      ko: action index of the point retaking is forbidden on (``None``,
        negative or pass = no ko); drawn as ``*`` while empty.
      komi: adds ``Komi 7.5``.
      move_number: adds ``Move 12``.
      captures: ``(stones captured by Black, stones captured by White)``.

    Returns:
      Lines joined by ``"\\n"`` (no trailing newline): column letters, one line
      per board row (row number on both sides, left one right-aligned), column
      letters again, then the info lines that were asked for. Each point takes
      two characters, ``" X"``; the last move borrows the separators on both
      sides, ``"(X)"``, so the columns stay aligned. ``X`` black, ``O`` white,
      ``.`` empty, ``+`` empty star point, ``*`` empty ko point.

    Example (9x9, Black's last move D5 = action 39)::

          A B C D E F G H J
        9 . . . . . . . . . 9
        ...
        5 . . . .(X). . . . 5
    """
    size = _check_size(size)
    flat = _as_board(board, size)
    last = _point_or_none(last_move, size, "last_move", allow_pass=True)
    ko_point = _point_or_none(ko, size, "ko", allow_pass=False)
    if to_play is not None and int(to_play) not in (1, -1):
        raise ValueError(f"to_play must be +1 (black) or -1 (white), got {to_play!r}")
    stars = _star_points(size)

    width = len(str(size))  # row numbers right-aligned to the widest one
    letters = " " * width + "".join(" " + GTP_COLUMNS[c] for c in range(size))
    lines = [letters]
    for row in range(size):
        # cells[2*c] is the separator left of column c, cells[2*c + 1] the point;
        # cells[2*size] is the separator before the right-hand row number.
        cells = [" "] * (2 * size + 1)
        for col in range(size):
            action = row * size + col
            value = flat[action]
            if value == 1:
                char = "X"
            elif value == -1:
                char = "O"
            elif action == ko_point:
                char = "*"
            elif action in stars:
                char = "+"
            else:
                char = "."
            cells[2 * col + 1] = char
            if action == last:
                cells[2 * col] = "("
                cells[2 * col + 2] = ")"
        number = size - row
        lines.append(f"{number:>{width}}" + "".join(cells) + str(number))
    lines.append(letters)

    if to_play is not None:
        lines.append(f"{'Black' if int(to_play) == 1 else 'White'} to play")
    if komi is not None:
        # ":g" prints 7.5 as "7.5" and 6.0 as "6", like GTP engines do.
        lines.append(f"Komi {float(komi):g}")
    if move_number is not None:
        lines.append(f"Move {int(move_number)}")
    if last is not None:
        lines.append(f"Last move: {action_to_gtp(last, size)}")
    if captures is not None:
        by_black, by_white = captures
        lines.append(f"Captures: Black {int(by_black)}, White {int(by_white)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- SVG


def _fmt(x: float) -> str:
    """A coordinate with at most two decimals and no trailing zeros (smaller files)."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _xml_text(text: str) -> str:
    """Escape ``text`` for XML character data.

    Besides ``&``/``<``/``>``, control characters are dropped: XML 1.0 cannot
    carry them at all, and a stray one would make the whole document unreadable.
    """
    clean = "".join(ch for ch in str(text) if ch >= " " or ch in "\t\n")
    return escape(clean)


def _as_heatmap(heatmap: ArrayLike, size: int, kind: str) -> np.ndarray:
    """Validate a heatmap and return it as flat ``float64[size * size]``."""
    arr = np.asarray(heatmap)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"heatmap must hold numbers, got dtype {arr.dtype}")
    flat = arr.reshape(-1).astype(np.float64)
    if flat.shape[0] != size * size:
        hint = (
            " (drop the pass entry of a policy first)" if flat.shape[0] == size * size + 1 else ""
        )
        raise ValueError(
            f"heatmap has {flat.shape[0]} values (shape {arr.shape}), "
            f"expected {size * size} for a {size}x{size} board{hint}"
        )
    if not np.all(np.isfinite(flat)):
        raise ValueError("heatmap contains NaN or infinite values")
    # A little slack: float32 network outputs can overshoot the range by rounding.
    tol = 1e-4
    if kind == "ownership" and np.any(np.abs(flat) > 1 + tol):
        raise ValueError(
            f"ownership values must be in [-1, 1], found {flat.min():.4g}..{flat.max():.4g}"
        )
    if kind == "policy" and (np.any(flat < -tol) or np.any(flat > 1 + tol)):
        raise ValueError(
            f"policy values must be in [0, 1], found {flat.min():.4g}..{flat.max():.4g}"
        )
    return np.clip(flat, -1.0, 1.0)


def _policy_text(p: float) -> str:
    """Percentage text: one decimal below 10% where the extra digit still matters."""
    pct = 100.0 * p
    return f"{pct:.0f}%" if pct >= 9.95 else f"{pct:.1f}%"


def board_to_svg(
    board: ArrayLike,
    *,
    size: int,
    last_move: int | None = None,
    heatmap: ArrayLike | None = None,
    heatmap_kind: str = "ownership",
    labels: dict[int, str] | None = None,
    title: str | None = None,
    cell: int = 32,
) -> str:
    """Render a position as a standalone SVG document (a string).

    Args:
      board: ``[size * size]`` ints, ``+1`` black, ``-1`` white, ``0`` empty.
      size: board side, 2..25.
      last_move: action index; its stone gets a ring of the opposite colour
        (class ``last-move``). ``None``, negative or pass (``size * size``):
        no marker.
      heatmap: optional ``[size * size]`` floats drawn as translucent squares
        (class ``heat``), one per nonzero value; full cells on empty points,
        smaller squares on stones so the stone stays visible.
      heatmap_kind: ``"ownership"``: values in [-1, 1], +1 = Black owns, -1 =
        White owns; the colour gives the side, the opacity ``|value|``.
        ``"policy"``: probabilities in [0, 1] (drop the pass entry first);
        opacity ``value / max``, plus a percentage (class ``heat-text``) on
        points with at least 1%.
      labels: ``{action: short text}`` drawn on points (class ``label``).
      title: optional caption line above the board (also the SVG ``<title>``).
      cell: pixels between adjacent lines (>= 8).

    Returns:
      An SVG document: ``<svg xmlns="http://www.w3.org/2000/svg" width height
      viewBox>`` with stones as ``<circle class="stone black|white">``.

    Raises:
      ValueError: wrong board/heatmap length, values out of range or NaN,
        unknown ``heatmap_kind``, label off the board, bad ``cell``.
    """
    size = _check_size(size)
    flat = _as_board(board, size)
    if heatmap_kind not in HEATMAP_KINDS:
        raise ValueError(f"heatmap_kind must be one of {HEATMAP_KINDS}, got {heatmap_kind!r}")
    heat = None if heatmap is None else _as_heatmap(heatmap, size, heatmap_kind)
    last = _point_or_none(last_move, size, "last_move", allow_pass=False)
    if isinstance(cell, bool) or not isinstance(cell, int | np.integer) or cell < 8:
        raise ValueError(f"cell must be an int >= 8 pixels, got {cell!r}")
    cell = int(cell)
    label_items: list[tuple[int, str]] = []
    if labels is not None:
        if not isinstance(labels, Mapping):
            raise ValueError(f"labels must be a dict {{action: text}}, got {type(labels).__name__}")
        for action, body in labels.items():
            a = int(action)
            if not 0 <= a < size * size:
                raise ValueError(f"label at action {a} is off a {size}x{size} board")
            label_items.append((a, str(body)))

    # Layout: a margin of 3/4 cell on every side holds the coordinates (with the
    # half cell up to the first line that leaves them clear of edge stones); the
    # title, when present, gets an extra band on top.
    c = float(cell)
    pad = 0.75 * c
    title_h = c if title is not None else 0.0
    width = 2 * pad + size * c
    height = title_h + 2 * pad + size * c

    def x_of(col: int) -> float:
        return pad + (col + 0.5) * c

    def y_of(row: int) -> float:
        return title_h + pad + (row + 0.5) * c

    def text(
        x: float, y: float, body: str, cls: str, size_px: float, fill: str, bold: bool = False
    ) -> str:
        weight = ' font-weight="bold"' if bold else ""
        return (
            f'<text class="{cls}" x="{_fmt(x)}" y="{_fmt(y)}" font-size="{_fmt(size_px)}"'
            f' fill="{fill}"{weight} font-family="Helvetica, Arial, sans-serif"'
            f' text-anchor="middle" dominant-baseline="central">{_xml_text(body)}</text>'
        )

    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" height="{_fmt(height)}"'
        f' viewBox="0 0 {_fmt(width)} {_fmt(height)}">'
    ]
    if title is not None:
        out.append(f"<title>{_xml_text(title)}</title>")
    out.append(
        f'<rect class="board" x="0" y="0" width="{_fmt(width)}" height="{_fmt(height)}"'
        f' fill="{_WOOD}"/>'
    )
    if title is not None:
        out.append(text(width / 2, title_h * 0.6, title, "title", c * 0.45, _INK, bold=True))

    # Grid: one line per row and column, from edge point to edge point.
    stroke = _fmt(max(1.0, c / 32))
    lo_x, hi_x = x_of(0), x_of(size - 1)
    lo_y, hi_y = y_of(0), y_of(size - 1)
    for i in range(size):
        out.append(
            f'<line class="grid" x1="{_fmt(lo_x)}" y1="{_fmt(y_of(i))}" x2="{_fmt(hi_x)}"'
            f' y2="{_fmt(y_of(i))}" stroke="{_INK}" stroke-width="{stroke}"/>'
        )
        out.append(
            f'<line class="grid" x1="{_fmt(x_of(i))}" y1="{_fmt(lo_y)}" x2="{_fmt(x_of(i))}"'
            f' y2="{_fmt(hi_y)}" stroke="{_INK}" stroke-width="{stroke}"/>'
        )
    for action in sorted(_star_points(size)):
        row, col = divmod(action, size)
        out.append(
            f'<circle class="star" cx="{_fmt(x_of(col))}" cy="{_fmt(y_of(row))}"'
            f' r="{_fmt(c * 0.1)}" fill="{_INK}"/>'
        )

    # Coordinates: letters above and below, numbers left and right (GTP naming).
    coord_px = c * 0.38
    for i in range(size):
        letter, number = GTP_COLUMNS[i], str(size - i)
        out.append(text(x_of(i), title_h + pad * 0.5, letter, "coord", coord_px, _INK))
        out.append(text(x_of(i), height - pad * 0.5, letter, "coord", coord_px, _INK))
        out.append(text(pad * 0.5, y_of(i), number, "coord", coord_px, _INK))
        out.append(text(width - pad * 0.5, y_of(i), number, "coord", coord_px, _INK))

    # Stones.
    radius = c * 0.47  # a hair under half a cell so neighbouring stones don't touch
    for action in np.flatnonzero(flat):
        row, col = divmod(int(action), size)
        black = flat[action] == 1
        out.append(
            f'<circle class="stone {"black" if black else "white"}" cx="{_fmt(x_of(col))}"'
            f' cy="{_fmt(y_of(row))}" r="{_fmt(radius)}"'
            f' fill="{_BLACK_STONE if black else _WHITE_STONE}" stroke="#000000"'
            f' stroke-width="{_fmt(max(0.5, c / 40))}"/>'
        )

    # Heat squares go over the stones: on a stone only a small centre square, so
    # e.g. a black stone carrying a white ownership square reads as "dead".
    if heat is not None:
        peak = float(heat.max()) if heatmap_kind == "policy" else 1.0
        for action in np.flatnonzero(heat):
            value = float(heat[action])
            row, col = divmod(int(action), size)
            if heatmap_kind == "ownership":
                fill = "#000000" if value > 0 else "#ffffff"
                strength = abs(value)
            else:
                fill = _POLICY_COLOUR
                strength = value / peak if peak > 0 else 0.0
            side = c * (0.45 if flat[action] != 0 else 1.0)
            out.append(
                f'<rect class="heat" x="{_fmt(x_of(col) - side / 2)}"'
                f' y="{_fmt(y_of(row) - side / 2)}" width="{_fmt(side)}" height="{_fmt(side)}"'
                f' fill="{fill}" fill-opacity="{strength * _MAX_HEAT_OPACITY:.3f}"/>'
            )

    if last is not None:
        row, col = divmod(last, size)
        # Opposite colour so the ring shows on the stone; red if the point is empty
        # (a caller passing a stale move), which still marks the spot.
        ring = {1: _WHITE_STONE, -1: _BLACK_STONE}.get(int(flat[last]), _POLICY_COLOUR)
        out.append(
            f'<circle class="last-move" cx="{_fmt(x_of(col))}" cy="{_fmt(y_of(row))}"'
            f' r="{_fmt(c * 0.22)}" fill="none" stroke="{ring}"'
            f' stroke-width="{_fmt(max(1.0, c * 0.07))}"/>'
        )

    def ink_on(action: int) -> str:
        # Readable text colour: white on black stones, dark elsewhere.
        return "#ffffff" if flat[action] == 1 else "#000000"

    if heat is not None and heatmap_kind == "policy":
        for action in np.flatnonzero(heat >= 0.01):
            row, col = divmod(int(action), size)
            out.append(
                text(
                    x_of(col),
                    y_of(row),
                    _policy_text(float(heat[action])),
                    "heat-text",
                    c * 0.3,
                    ink_on(int(action)),
                )
            )

    for action, body in label_items:
        row, col = divmod(action, size)
        out.append(text(x_of(col), y_of(row), body, "label", c * 0.45, ink_on(action), bold=True))

    out.append("</svg>")
    return "\n".join(out) + "\n"


def save_svg(svg: str, path: str | os.PathLike) -> None:
    """Write ``svg`` (UTF-8) to ``path`` atomically.

    The text goes to a temporary file in the same folder (so the final rename
    never crosses file systems), which then replaces ``path`` with
    ``os.replace``: a reader sees either the old file or the complete new one,
    never a partial write. The temporary file is removed if anything fails.
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(svg)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; a picture is meant to be shared and viewed.
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def state_to_text(state) -> str:
    """Showboard of a :class:`gojax.GoState` (to play, komi, move, last move, captures)."""
    last = int(state.recent_moves[0])
    return board_to_text(
        np.asarray(state.board),
        size=state.size,
        to_play=int(state.to_play),
        last_move=last if last >= 0 else None,
        ko=int(state.ko),
        komi=float(state.komi),
        move_number=int(state.move_number),
        captures=tuple(int(x) for x in np.asarray(state.captures)),
    )


def state_to_svg(state, **options) -> str:
    """SVG of a :class:`gojax.GoState`; ``options`` as for :func:`board_to_svg`."""
    last = int(state.recent_moves[0])
    options.setdefault("last_move", last if 0 <= last < state.size**2 else None)
    return board_to_svg(np.asarray(state.board), size=state.size, **options)
