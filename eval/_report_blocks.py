"""Marker blocks for ``gojax report``: finding ``<!-- report:NAME -->`` ...
``<!-- /report:NAME -->`` in markdown and replacing what they hold.

Text only, no results: separate so that the block syntax (a marker alone on its
line, outside fenced code) is defined in one place.
"""

from __future__ import annotations

import re
from pathlib import Path

# A marker alone on its line: <!-- report:NAME --> opens a block, <!-- /report:NAME --> closes it.
_MARKER = re.compile(r"<!--\s*(/?)report:([A-Za-z0-9_.-]+)\s*-->")
_FENCE = ("```", "~~~")


def _blocks(text: str, where: str) -> list[tuple[int, int, str]]:
    """``(open line, close line, name)`` of each marker block in ``text`` (0-based lines).

    Raises ValueError (``where:line: ...``) for a block left open, closed without
    being opened, or opened inside another.
    """
    blocks, open_at, open_name, fence = [], None, None, None
    for number, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if fence is not None:
            fence = None if stripped.startswith(fence) else fence
            continue
        if stripped.startswith(_FENCE):
            fence = stripped[:3]
            continue
        match = _MARKER.fullmatch(stripped)
        if match is None:
            continue
        closing, name = match.group(1) == "/", match.group(2)
        if not closing and open_name is not None:
            raise ValueError(
                f"{where}:{number + 1}: report:{name} opened inside report:{open_name}"
            )
        if closing and name != open_name:
            raise ValueError(f"{where}:{number + 1}: /report:{name} closes no open block")
        if closing:
            blocks.append((open_at, number, name))
            open_name = None
        else:
            open_at, open_name = number, name
    if open_name is not None:
        raise ValueError(f"{where}:{open_at + 1}: report:{open_name} is never closed")
    return blocks


def replace_blocks(text: str, contents: dict[str, str], *, where: str = "<text>"):
    """``text`` with each block named in ``contents`` holding that content; all else kept.

    Returns ``(new text, names of every block in text)``. Raises ValueError for
    unbalanced markers.
    """
    blocks = _blocks(text, where)
    lines = text.splitlines(keepends=True)
    out, position = [], 0
    for start, stop, name in blocks:
        out.extend(lines[position : start + 1])
        if name in contents:
            # Blank lines around the content: a table then never touches a marker line.
            content = contents[name].strip("\n")
            out.append(f"\n{content}\n\n" if content else "")
        else:
            out.extend(lines[start + 1 : stop])
        position = stop
    out.extend(lines[position:])
    return "".join(out), [name for _, _, name in blocks]


def _block_text(text: str, name: str, where: Path) -> list[str]:
    lines = text.splitlines()
    return ["\n".join(lines[a + 1 : b]) for a, b, n in _blocks(text, str(where)) if n == name]
